// Stand-in at ROCclr's include path utils/debug.hpp (see standin_rocclr.hpp).
#pragma once
#include "../standin_rocclr.hpp"
