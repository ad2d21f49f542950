package redis_test

import (
	"context"
	"fmt"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
)

// A create is safe to retry: the same content again is not an error, other
// content under the same id is a conflict.
func ExampleStore_CreatePlant() {
	ctx := context.Background()
	store, closeStore, err := redis.Embedded(ctx, redis.Options{})
	if err != nil {
		panic(err)
	}
	defer closeStore()

	fern := host.Plant{ID: 1, Name: "Fern", Tag: "indoor", HasTag: true}
	fmt.Println(store.CreatePlant(ctx, fern))
	fmt.Println(store.CreatePlant(ctx, fern))
	fmt.Println(store.CreatePlant(ctx, host.Plant{ID: 1, Name: "Fern"}))
	// Output:
	// true <nil>
	// false <nil>
	// false 40003: plant 1 already exists with other content
}
