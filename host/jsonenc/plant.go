package jsonenc

import (
	"strconv"

	"github.com/plantgate/plantgate/host"
)

// AppendStoredPlant appends p as compact JSON with the keys in the order id,
// name, tag, and tag left out when p has none:
//
//	{"id":42,"name":"Fern","tag":"indoor"}
//
// It is both the store's canonical content of a plant and the StoredPlant
// body of GET /plants/{id} and GET /plants, so what a client reads back is
// spelled exactly as it is stored. Deterministic and injective for valid
// UTF-8, so stored content can be compared byte for byte.
func AppendStoredPlant(dst []byte, p host.Plant) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, p.ID, 10)
	dst = append(dst, `,"name":`...)
	dst = AppendString(dst, p.Name)
	if p.HasTag {
		dst = append(dst, `,"tag":`...)
		dst = AppendString(dst, p.Tag)
	}
	return append(dst, '}')
}
