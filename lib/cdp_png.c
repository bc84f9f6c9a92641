#include "cdp_png.h"
