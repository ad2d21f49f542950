package http_test

import (
	"bytes"
	"io"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	gatehttp "github.com/plantgate/plantgate/host/http"
)

var (
	openAPIOnce      sync.Once
	openAPIValidator validator.Validator
	openAPIErr       error
)

func loadValidator(t testing.TB) validator.Validator {
	t.Helper()
	openAPIOnce.Do(func() {
		doc, err := libopenapi.NewDocument(gatehttp.OpenAPI)
		if err != nil {
			openAPIErr = err
			return
		}
		v, errs := validator.NewValidator(doc)
		if len(errs) > 0 {
			openAPIErr = errs[0]
			return
		}
		openAPIValidator = v
	})
	if openAPIErr != nil {
		t.Fatalf("OpenAPI document: %v", openAPIErr)
	}
	return openAPIValidator
}

// checkOpenAPI validates a response the gateway gave against the served
// OpenAPI document: status declared, content type and body schema. Routes
// the document cannot declare (404 and 405 for operations it does not have) are
// checked against the Error schema through the /plants 400 response, which
// declares exactly that schema.
func checkOpenAPI(t testing.TB, req *nethttp.Request, resp *nethttp.Response, body []byte) {
	t.Helper()
	v := loadValidator(t)
	r := *resp
	r.Body = io.NopCloser(bytes.NewReader(body))
	q := req
	if !declared(req.Method, req.URL.Path) {
		q, _ = nethttp.NewRequest(nethttp.MethodPost, "http://plantgate.test/plants", nil)
		q.Header.Set("Content-Type", "application/json")
		r.StatusCode = 400
	}
	if ok, errs := v.ValidateHttpResponse(q, &r); !ok {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error()+" "+e.Reason)
			for _, se := range e.SchemaValidationErrors {
				msgs = append(msgs, "  "+se.Reason+" at "+se.FieldPath)
			}
		}
		t.Errorf("%s %s → %d %s: response breaks the OpenAPI document:\n%s", req.Method, req.URL.Path, resp.StatusCode, body, strings.Join(msgs, "\n"))
	}
}

func declared(method, path string) bool {
	switch method + " " + path {
	case "GET /plants", "POST /plants", "OPTIONS /plants", "GET /openapi.yaml", "GET /healthz", "GET /readyz":
		return true
	}
	if id, ok := strings.CutPrefix(path, "/plants/"); ok && id != "" && !strings.Contains(id, "/") {
		return method == nethttp.MethodGet || method == nethttp.MethodDelete || method == nethttp.MethodOptions
	}
	return false
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	v := loadValidator(t)
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("%v: %s", e, e.Reason)
		}
	}
	if !bytes.HasPrefix(gatehttp.OpenAPI, []byte("openapi: 3.1.0\n")) {
		t.Fatal("document is not OpenAPI 3.1.0")
	}
	for _, want := range []string{"title: Plant Store", "version: 1.0.0", "operationId: addPlant"} {
		if !bytes.Contains(gatehttp.OpenAPI, []byte(want)) {
			t.Errorf("document lacks %q", want)
		}
	}
}
