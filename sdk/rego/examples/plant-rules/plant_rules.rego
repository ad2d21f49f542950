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

# The decision: the first rule broken, in the order above, or true. An
# else chain stops at the first rule that matches, so an allowed plant
# costs one test per rule, and a message is only formatted for the deny.
# The tag's rules are undefined, not broken, when the plant has no tag.
validate := {"allow": false, "code": 40050, "message": $"id must be at least {id_min}, got {input.plant.id}"} if {
	input.plant.id < id_min
} else := control_denial("name", input.plant.name, 40052) if {
	has_control(input.plant.name)
} else := length_denial("name", input.plant.name, name_min, name_max, 40051) if {
	outside(input.plant.name, name_min, name_max)
} else := control_denial("tag", input.plant.tag, 40054) if {
	has_control(input.plant.tag)
} else := length_denial("tag", input.plant.tag, tag_min, tag_max, 40053) if {
	outside(input.plant.tag, tag_min, tag_max)
} else := true

# has_control compares each character with the control ranges, unless
# allow_control: single characters order as their code points do. A table
# of the control characters to look each up in would be an object built
# on every evaluation, costing more than the rest of an allowed plant's
# rules together, and a regex costs more still (OPA's Wasm runtime compiles
# it on every evaluation), so it is left to values too long to split
# cheaply.
has_control(s) if {
	not allow_control
	count(s) <= 4096
	chars := split(s, "")
	not printable_ascii(chars)
	some c in chars
	is_control(c)
}

has_control(s) if {
	not allow_control
	count(s) > 4096
	regex.match(`[\x00-\x1f\x7f-\x9f]`, s)
}

# printable_ascii: every character is " " to "~", the common case,
# answered by two builtin calls rather than a loop.
printable_ascii(chars) if {
	min(chars) >= " "
	max(chars) <= "~"
}

is_control(c) if c < " "

is_control(c) if {
	c >= "\u007f"
	c <= "\u009f"
}

# control_denial names the first control character: its code point and
# its position (1-based, in characters).
control_denial(field, s, code) := {"allow": false, "code": code, "message": msg} if {
	chars := split(s, "")
	i := min({j | some j, c in chars; is_control(c)})
	msg := $"{field} must not contain control characters, found U+{hex4(code_point(chars[i]))} at character {i + 1}"
}

# hex4 is %04X: n + 0x10000 in hex is "1" and then n's four digits.
hex4(n) := upper(substring(format_int(n + 65536, 16), 1, 4))

# outside: s has fewer than lo or more than hi characters after trimming.
outside(s, lo, hi) if count(trim_space(s)) < lo

outside(s, lo, hi) if count(trim_space(s)) > hi

length_denial(field, s, lo, hi, code) := {"allow": false, "code": code, "message": length_message(field, lo, hi, count(trim_space(s)))}

length_message(field, lo, hi, n) := $"{field} must be exactly {lo} characters after trimming, got {n}" if lo == hi

else := $"{field} must be {lo}–{hi} characters after trimming, got {n}"

# controls are the control characters (Go's unicode.IsControl) in code
# point order: U+0000–U+001F, then U+007F–U+009F. A string is a constant
# of the module; an object mapping each to its code point would be built
# on every evaluation that reads it.
controls := "\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\u0008\u0009\u000a\u000b\u000c\u000d\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f\u007f\u0080\u0081\u0082\u0083\u0084\u0085\u0086\u0087\u0088\u0089\u008a\u008b\u008c\u008d\u008e\u008f\u0090\u0091\u0092\u0093\u0094\u0095\u0096\u0097\u0098\u0099\u009a\u009b\u009c\u009d\u009e\u009f"

# code_point is the code point of the control character c.
code_point(c) := i if {
	i := indexof(controls, c)
	i < 32
} else := indexof(controls, c) + 95
