# The Rego plant-rules fixture: both phases, data from the sidecar's
# config, and sprintf (a builtin that reaches the host as opa_builtin2).
package plantgate

import rego.v1

default authorize := false

authorize if input.method in {"GET", "HEAD"}

authorize := {"allow": false, "code": 40351, "message": sprintf("%s %s needs plants:write", [input.method, input.route])} if {
	not input.method in {"GET", "HEAD"}
	not "plants:write" in object.get(input, ["caller", "scopes"], [])
}

authorize if {
	not input.method in {"GET", "HEAD"}
	"plants:write" in input.caller.scopes
}

validate := {"allow": false, "code": 40050, "message": sprintf("tag %q is banned", [input.plant.tag])} if {
	input.plant.tag in data.banned_tags
} else := true
