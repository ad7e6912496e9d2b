#include "rnic/memory/access_error.hpp"

namespace rnic::mem {

std::string_view access_error_name(AccessError error) noexcept {
    switch (error) {
        case AccessError::None:
            return "none";
        case AccessError::InvalidKey:
            return "invalid_key";
        case AccessError::PdMismatch:
            return "pd_mismatch";
        case AccessError::AccessDenied:
            return "access_denied";
        case AccessError::OutOfBounds:
            return "out_of_bounds";
        case AccessError::Misaligned:
            return "misaligned";
        case AccessError::Fault:
            return "fault";
        case AccessError::QpMismatch:
            return "qp_mismatch";
        case AccessError::Pending:
            return "pending";
    }
    return "unknown";
}

}  // namespace rnic::mem
