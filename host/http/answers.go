package http

import (
	"strconv"

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
	return appendNameTag(dst, p)
}

// AppendStoredPlant appends the StoredPlant body {"id":…,"name":…,"tag":…}
// to dst, the tag only when the plant has one: the answer of GET
// /plants/{id} and an element of GET /plants.
func AppendStoredPlant(dst []byte, p host.Plant) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, p.ID, 10)
	dst = append(dst, `,"name":`...)
	return appendNameTag(dst, p)
}

// AppendPlantList appends the JSON array of StoredPlant bodies to dst.
func AppendPlantList(dst []byte, ps []host.Plant) []byte {
	dst = append(dst, '[')
	for i, p := range ps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendStoredPlant(dst, p)
	}
	return append(dst, ']')
}

// appendNameTag appends the name's value and the optional tag, and closes
// the object.
func appendNameTag(dst []byte, p host.Plant) []byte {
	dst = jsonenc.AppendString(dst, p.Name)
	if p.HasTag {
		dst = append(dst, `,"tag":`...)
		dst = jsonenc.AppendString(dst, p.Tag)
	}
	return append(dst, '}')
}
