// Stand-in at ROCclr's include path thread/thread.hpp (see standin_rocclr.hpp).
#pragma once
#include "../standin_rocclr.hpp"
