# METADATA
# title: plant-rules
# description: |
#   The bundled plant-rules policy in Rego: a plant's id, name and tag
#   against configurable bounds, with the same codes and messages as the Go,
#   Rust, C and AssemblyScript versions (testdata/expect/plant-rules.jsonl).
#
#   The rules, checked in this order (the first that fails decides):
#
#     code   rule (defaults)
#     40050  id is at least id_min (1)
#     40052  name has no control characters (unless allow_control)
#     40051  name has name_min–name_max (1–100) characters after trimming spaces
#     40054  tag has no control characters (unless allow_control), when present
#     40053  tag has tag_min–tag_max (1–50) characters after trimming, when present
#
#   Characters are Unicode code points; control characters are those of
#   Go's unicode.IsControl (U+0000–U+001F, U+007F–U+009F). The sidecar's
#   "config" is data: {"name_min": 1, "name_max": 100, "tag_min": 1,
#   "tag_max": 50, "id_min": 1, "allow_control": false}, every key optional.
package plantgate

import rego.v1

# The config's bounds, each defaulted.
default name_min := 1

name_min := data.name_min

default name_max := 100

name_max := data.name_max

default tag_min := 1

tag_min := data.tag_min

default tag_max := 50

tag_max := data.tag_max

default id_min := 1

id_min := data.id_min

default allow_control := false

allow_control := data.allow_control

# The decision: the first rule broken, or true.
validate := violations[0] if count(violations) > 0

else := true

# violations are ordered by rule: an array, so the first one decides.
violations := array.concat(array.concat(id_violation, field_violations("name", input.plant.name, name_min, name_max, 40051, 40052)), tag_violations)

id_violation := [{"allow": false, "code": 40050, "message": sprintf("id must be at least %d, got %d", [id_min, input.plant.id])}] if {
	input.plant.id < id_min
} else := []

tag_violations := field_violations("tag", input.plant.tag, tag_min, tag_max, 40053, 40054) if {
	"tag" in object.keys(input.plant)
} else := []

field_violations(field, s, lo, hi, code_length, code_control) := [v] if {
	v := control_violation(field, s, code_control)
} else := [v] if {
	v := length_violation(field, s, lo, hi, code_length)
} else := []

control_violation(field, s, code) := {"allow": false, "code": code, "message": msg} if {
	not allow_control
	regex.match(`[\x00-\x1f\x7f-\x9f]`, s)
	chars := split(s, "")
	i := min({j | some j, c in chars; regex.match(`^[\x00-\x1f\x7f-\x9f]$`, c)})
	msg := sprintf("%s must not contain control characters, found U+%04X at character %d", [field, code_point(chars[i]), i + 1])
}

length_violation(field, s, lo, hi, code) := {"allow": false, "code": code, "message": msg} if {
	n := count(trim_space(s))
	not between(n, lo, hi)
	msg := length_message(field, lo, hi, n)
}

between(n, lo, hi) if {
	n >= lo
	n <= hi
}

length_message(field, lo, hi, n) := sprintf("%s must be exactly %d characters after trimming, got %d", [field, lo, n]) if lo == hi

else := sprintf("%s must be %d–%d characters after trimming, got %d", [field, lo, hi, n])

# code_point of a control character: JSON spells each as \u00XX.
code_point(c) := to_number(sprintf("%d", [n])) if {
	some n in control_points
	json.unmarshal(sprintf(`"\u%04x"`, [n])) == c
}

control_points := array.concat(numbers.range(0, 31), numbers.range(127, 159))
