package plantgate_test

import rego.v1

import data.plantgate

plant(p) := {"plant": p, "allowed_as": ""}

test_valid_plant if plantgate.validate with input as plant({"id": 1, "name": "Monstera", "tag": "tropical"})

test_no_tag if plantgate.validate with input as plant({"id": 7, "name": "Fern"})

test_id_zero if {
	plantgate.validate == {"allow": false, "code": 40050, "message": "id must be at least 1, got 0"} with input as plant({"id": 0, "name": ""})
}

test_name_trimmed if {
	plantgate.validate == {"allow": false, "code": 40051, "message": "name must be 1–100 characters after trimming, got 0"} with input as plant({"id": 1, "name": "   "})
}

test_control_character if {
	plantgate.validate == {"allow": false, "code": 40052, "message": "name must not contain control characters, found U+0007 at character 4"} with input as plant({"id": 1, "name": "Mon\u0007stera"})
}

test_tag_length_from_config if {
	plantgate.validate == {"allow": false, "code": 40053, "message": "tag must be exactly 3 characters after trimming, got 4"} with input as plant({"id": 1, "name": "Fern", "tag": "leaf"})
		with data.tag_min as 3
		with data.tag_max as 3
}

test_allow_control if plantgate.validate with input as plant({"id": 1, "name": "a\tb"}) with data.allow_control as true

# U+0000 and the C1 range are control characters too; a no-break space
# is not one (Go's unicode.IsControl).
test_nul if {
	plantgate.validate == {"allow": false, "code": 40052, "message": "name must not contain control characters, found U+0000 at character 4"} with input as plant({"id": 1, "name": "Mr.\u0000X"})
}

test_c1_control if {
	plantgate.validate == {"allow": false, "code": 40054, "message": "tag must not contain control characters, found U+0085 at character 3"} with input as plant({"id": 1, "name": "Fern", "tag": "a.\u0085"})
}

test_nbsp_is_not_control if plantgate.validate with input as plant({"id": 1, "name": "Fern\u00a0Leaf"})
