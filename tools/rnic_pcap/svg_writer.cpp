#include "svg_writer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace rnic::tools {

std::string xml_escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default:
            // Control characters are not allowed in XML 1.0 text: drop them.
            if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
        }
    }
    return out;
}

SvgWriter::SvgWriter(double width, double height) : width_(width), height_(height) {}

std::string SvgWriter::num(double v) {
    if (!std::isfinite(v)) v = 0;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

std::string SvgWriter::attr(std::string_view name, std::string_view value) {
    if (value.empty()) return {};
    return " " + std::string(name) + "=\"" + xml_escape(value) + "\"";
}

void SvgWriter::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
                     std::string_view cls, std::string_view dash) {
    body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
             "\"" + attr("stroke", stroke) + " stroke-width=\"" + num(width) + "\"" +
             attr("stroke-dasharray", dash) + attr("class", cls) + "/>\n";
}

void SvgWriter::rect(double x, double y, double w, double h, std::string_view fill, std::string_view cls,
                     double opacity, std::string_view stroke) {
    body_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(w, 0.0)) +
             "\" height=\"" + num(std::max(h, 0.0)) + "\"" + attr("fill", fill) + attr("stroke", stroke) +
             (opacity < 1 ? " fill-opacity=\"" + num(opacity) + "\"" : std::string()) + attr("class", cls) + "/>\n";
}

void SvgWriter::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                         double width, std::string_view cls) {
    std::string pts;
    for (const auto& [x, y] : points) {
        if (!pts.empty()) pts += ' ';
        pts += num(x) + "," + num(y);
    }
    body_ += "<polyline points=\"" + pts + "\" fill=\"none\"" + attr("stroke", stroke) + " stroke-width=\"" +
             num(width) + "\"" + attr("class", cls) + "/>\n";
}

void SvgWriter::marker(MarkerShape shape, double x, double y, double s, std::string_view colour,
                       std::string_view cls, std::string_view tooltip) {
    std::string open;
    std::string paint = attr("fill", colour);
    switch (shape) {
    case MarkerShape::Dot:
        open = "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"" + num(s) + "\"";
        break;
    case MarkerShape::Square:
        open = "<rect x=\"" + num(x - s) + "\" y=\"" + num(y - s) + "\" width=\"" + num(2 * s) + "\" height=\"" +
               num(2 * s) + "\"";
        break;
    case MarkerShape::TriangleUp:
        open = "<path d=\"M" + num(x) + " " + num(y - s) + "L" + num(x + s) + " " + num(y + s) + "L" +
               num(x - s) + " " + num(y + s) + "Z\"";
        break;
    case MarkerShape::TriangleDown:
        open = "<path d=\"M" + num(x) + " " + num(y + s) + "L" + num(x + s) + " " + num(y - s) + "L" +
               num(x - s) + " " + num(y - s) + "Z\"";
        break;
    case MarkerShape::Diamond:
        open = "<path d=\"M" + num(x) + " " + num(y - s) + "L" + num(x + s) + " " + num(y) + "L" + num(x) + " " +
               num(y + s) + "L" + num(x - s) + " " + num(y) + "Z\"";
        break;
    case MarkerShape::Cross:
        open = "<path d=\"M" + num(x - s) + " " + num(y - s) + "L" + num(x + s) + " " + num(y + s) + "M" +
               num(x - s) + " " + num(y + s) + "L" + num(x + s) + " " + num(y - s) + "\" stroke-width=\"1.6\"";
        paint = " fill=\"none\"" + attr("stroke", colour);
        break;
    case MarkerShape::Plus:
        open = "<path d=\"M" + num(x - s) + " " + num(y) + "L" + num(x + s) + " " + num(y) + "M" + num(x) + " " +
               num(y - s) + "L" + num(x) + " " + num(y + s) + "\" stroke-width=\"1.6\"";
        paint = " fill=\"none\"" + attr("stroke", colour);
        break;
    }
    body_ += open + paint + attr("class", cls);
    if (tooltip.empty()) body_ += "/>\n";
    else body_ += "><title>" + xml_escape(tooltip) + "</title></" +
                  std::string(shape == MarkerShape::Dot ? "circle" : shape == MarkerShape::Square ? "rect" : "path") +
                  ">\n";
}

void SvgWriter::text(double x, double y, std::string_view content, double size, std::string_view anchor,
                     double rotate, std::string_view weight) {
    body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(size) + "\"" +
             attr("text-anchor", anchor) + attr("font-weight", weight) +
             (rotate != 0 ? " transform=\"rotate(" + num(rotate) + " " + num(x) + " " + num(y) + ")\"" : std::string()) +
             ">" + xml_escape(content) + "</text>\n";
}

void SvgWriter::begin_group(std::string_view cls) { body_ += "<g" + attr("class", cls) + ">\n"; }

void SvgWriter::end_group() { body_ += "</g>\n"; }

std::string SvgWriter::finish() const {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
           "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(width_) + "\" height=\"" +
           num(height_) + "\" viewBox=\"0 0 " + num(width_) + " " + num(height_) +
           "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
           "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n" +
           body_ + "</svg>\n";
}

}  // namespace rnic::tools
