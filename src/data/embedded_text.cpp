// See include/ppstage/data/embedded_text.h. The bytes come from embedded_text.S.
#include "ppstage/data/embedded_text.h"

extern "C" const char ppstage_embedded_text_begin[];
extern "C" const char ppstage_embedded_text_end[];

namespace ppstage {

std::string_view embeddedText() {
  return {ppstage_embedded_text_begin,
          static_cast<size_t>(ppstage_embedded_text_end - ppstage_embedded_text_begin)};
}

const char* embeddedTextName() { return "Jargon File 4.4.7 (public domain), excerpt"; }

}  // namespace ppstage
