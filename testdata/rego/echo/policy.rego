# Answers whatever decision the request carries, to test the mapping of
# every value: authorize the JSON in the X-Decision header, validate the
# JSON in the plant's name. No header, or no name, is undefined; "input"
# denies with the input as the message.
package plantgate

import rego.v1

authorize := json.unmarshal(input.headers["X-Decision"]) if input.headers["X-Decision"] != "input"

authorize := {"allow": false, "code": 40399, "message": json.marshal(input)} if input.headers["X-Decision"] == "input"

validate := json.unmarshal(input.plant.name) if input.plant.name != "input"

validate := {"allow": false, "code": 40399, "message": json.marshal(input)} if input.plant.name == "input"
