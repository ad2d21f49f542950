# Serves the authorize phase only; denies DELETE without a code.
package plantgate

import rego.v1

authorize := input.method != "DELETE"
