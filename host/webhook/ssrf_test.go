package webhook_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/plantgate/plantgate/host/webhook"
)

func TestForbidden(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ip   string
		want bool
	}{
		{"127.0.0.1", true}, {"127.8.9.10", true}, {"::1", true}, {"0.0.0.0", true}, {"::", true},
		{"10.1.2.3", true}, {"172.16.0.1", true}, {"192.168.1.1", true}, {"fc00::1", true},
		{"169.254.169.254", true}, {"fd00:ec2::254", true}, {"fe80::1", true}, {"100.64.0.1", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:169.254.169.254", true}, {"64:ff9b::a9fe:a9fe", true},
		{"224.0.0.1", true}, {"255.255.255.255", true},
		{"93.184.215.14", false}, {"2606:4700::1111", false}, {"8.8.8.8", false}, {"64:ff9b::808:808", false},
	} {
		if got := webhook.Forbidden(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("Forbidden(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://[::1]/", "http://169.254.169.254/latest/meta-data", "http://[fd00:ec2::254]/", "https://10.0.0.1/", "http://localhost:9/"} {
		if err := webhook.CheckURL(ctx, u, false); !errors.Is(err, webhook.ErrForbiddenAddress) {
			t.Errorf("CheckURL(%s) = %v, want ErrForbiddenAddress", u, err)
		}
		if err := webhook.CheckURL(ctx, u, true); err != nil {
			t.Errorf("CheckURL(%s, allow private) = %v", u, err)
		}
	}
	for _, u := range []string{"ftp://example.com/", "http:///nohost", "https://user:pw@93.184.215.14/", "file:///etc/passwd"} {
		if err := webhook.CheckURL(ctx, u, true); err == nil {
			t.Errorf("CheckURL(%s) accepted", u)
		}
	}
	if err := webhook.CheckURL(ctx, "https://93.184.215.14/hook", false); err != nil {
		t.Errorf("public literal refused: %v", err)
	}
}
