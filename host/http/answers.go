package http

import (
	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/jsonenc"
)

// The success bodies, encoded by hand: they are on every request's path,
// and each is a few fields whose order the OpenAPI document fixes.

// AppendPlant appends the Plant body {"name":…,"tag":…} to dst, the tag only
// when the plant has one: the answer of POST /plants, whose declared shape
// has no id.
func AppendPlant(dst []byte, p host.Plant) []byte {
	dst = append(dst, `{"name":`...)
	dst = jsonenc.AppendString(dst, p.Name)
	if p.HasTag {
		dst = append(dst, `,"tag":`...)
		dst = jsonenc.AppendString(dst, p.Tag)
	}
	return append(dst, '}')
}

// AppendPlantList appends the JSON array of StoredPlant bodies to dst.
func AppendPlantList(dst []byte, ps []host.Plant) []byte {
	dst = append(dst, '[')
	for i, p := range ps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendStoredPlant(dst, p)
	}
	return append(dst, ']')
}
