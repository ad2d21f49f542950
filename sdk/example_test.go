package sdk_test

import (
	"fmt"

	"github.com/plantgate/plantgate/sdk"
	"github.com/plantgate/plantgate/sdk/sdktest"
)

// A plugin registers its handlers in init; sdktest runs them natively
// through the same encoding the wasm exports use.
func Example() {
	sdk.HandleValidate(func(p sdk.Plant) sdk.Decision {
		if p.ID < 1 {
			return sdk.Deny(40050, "id must be at least 1")
		}
		if p.HasTag && p.Tag == "" {
			return sdk.Deny(40051, "tag must not be empty")
		}
		return sdk.Allow()
	})
	defer sdk.HandleValidate(nil)

	fmt.Println(sdktest.Validate(sdk.Plant{ID: 0, Name: "fern"}))
	fmt.Println(sdktest.Validate(sdk.Plant{ID: 1, Name: "fern", HasTag: true}))
	fmt.Println(sdktest.Validate(sdk.Plant{ID: 1, Name: "fern"}))
	// Output:
	// deny 40050: id must be at least 1
	// deny 40051: tag must not be empty
	// allow
}

// A deny code's hundreds are the HTTP status and its last two digits 50–99.
// Any other code fails closed as a fault instead of allowing.
func ExampleDeny() {
	d := sdk.Deny(40351, "token lacks scope plants:write")
	fmt.Println(d.Code()/100, d.Message())

	d = sdk.Deny(40001, "looks like a host error")
	fmt.Println(d.Faulted())
	// Output:
	// 403 token lacks scope plants:write
	// true
}
