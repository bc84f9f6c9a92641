#include "cdp_record.h"
