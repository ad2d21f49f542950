/* plant-rules' config: the bounds, every one inclusive. */
#ifndef PLANT_RULES_CONFIG_H
#define PLANT_RULES_CONFIG_H

#include "plantgate.h"

typedef struct {
	int64_t name_min, name_max, tag_min, tag_max, id_min;
	int allow_control;
} config;

#define CONFIG_DEFAULT {1, 100, 1, 50, 1, 0}

/* config_parse reads raw (JSON) over the defaults into *out: NULL, or what
 * is wrong (in pg_textf's buffer, or a constant). */
const char *config_parse(pg_str raw, config *out);

#endif
