// Stand-in at ROCclr's include path device/devhostcall.hpp (see standin_rocclr.hpp).
#pragma once
#include "../standin_rocclr.hpp"
