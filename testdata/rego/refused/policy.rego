# Calls http.send, which Plantgate refuses at load.
package plantgate

import rego.v1

authorize if http.send({"method": "GET", "url": "http://example.com"}).status_code == 200
