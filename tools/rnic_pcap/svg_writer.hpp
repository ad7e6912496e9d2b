// A minimal SVG 1.1 writer: shapes, text and groups appended to a string, numbers with two
// decimals, text escaped. Enough for rnic-pcap's plots without a plotting dependency.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rnic::tools {

std::string xml_escape(std::string_view text);

// Shapes for data points; each is centred on (x, y) and about 2*size wide.
enum class MarkerShape { Dot, Cross, TriangleUp, TriangleDown, Square, Diamond, Plus };

class SvgWriter {
public:
    SvgWriter(double width, double height);

    // `cls` becomes the element's class attribute (tests count markers by it); empty: none.
    void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
              std::string_view cls = {}, std::string_view dash = {});
    void rect(double x, double y, double w, double h, std::string_view fill, std::string_view cls = {},
              double opacity = 1, std::string_view stroke = {});
    void polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                  double width = 1, std::string_view cls = {});
    void marker(MarkerShape shape, double x, double y, double size, std::string_view colour,
                std::string_view cls = {}, std::string_view tooltip = {});
    // anchor: "start", "middle" or "end"; rotate: degrees around (x, y).
    void text(double x, double y, std::string_view content, double size = 11, std::string_view anchor = "start",
              double rotate = 0, std::string_view weight = {});
    void begin_group(std::string_view cls);
    void end_group();

    std::string finish() const;  // the whole document

private:
    static std::string num(double v);
    static std::string attr(std::string_view name, std::string_view value);
    double width_;
    double height_;
    std::string body_;
};

}  // namespace rnic::tools
