# Works as long as the path's id says: a long evaluation for the time
# limit, a large one for the memory limit.
package plantgate

import rego.v1

authorize if {
	n := object.get(input, "id", 1)
	count([x | some x in numbers.range(1, n); x % 7 == 0]) >= 0
}
