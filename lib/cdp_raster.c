#include "cdp_raster.h"
