// Stand-in at ROCclr's include path device/devsanitizer.hpp (see standin_rocclr.hpp).
#pragma once
#include "../standin_rocclr.hpp"
