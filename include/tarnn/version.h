// The library's version and the git commit it was built from ("unknown" outside a checkout;
// "-dirty" when tracked files had changes).
#pragma once

namespace tarnn {

const char *version();    // "0.2.0"
const char *git_commit(); // "3f2c1a9b8d7e" or "3f2c1a9b8d7e-dirty"

} // namespace tarnn
