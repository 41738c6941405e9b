// Stand-in at ROCclr's include path platform/memory.hpp (see standin_rocclr.hpp).
#pragma once
#include "../standin_rocclr.hpp"
