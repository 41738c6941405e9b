// Stand-in at ROCclr's include path platform/context.hpp (see standin_rocclr.hpp).
#pragma once
#include "../standin_rocclr.hpp"
