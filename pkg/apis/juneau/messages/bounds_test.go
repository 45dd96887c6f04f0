package messages

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestString(t *testing.T) {
	if got := Cut("short", 10); got != "short" {
		t.Errorf("short string changed: %q", got)
	}
	got := Cut(strings.Repeat("a", 100), 10)
	if got != "aaaaaaaaaa... (90 more bytes)" {
		t.Errorf("got %q", got)
	}
	// Never half a character.
	got = Cut("ééééé", 3) // 2 bytes each
	if got != "é... (8 more bytes)" {
		t.Errorf("got %q", got)
	}
}

func TestErrorsKeepsFewAndCountsTheRest(t *testing.T) {
	huge := strings.Repeat("x", 166*1024)
	var errs field.ErrorList
	for i := range 5000 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Index(i), huge, strings.Repeat("why ", 1000)))
	}
	out := Errors(errs)
	if len(out) != MaxErrors {
		t.Fatalf("%d errors kept, want %d", len(out), MaxErrors)
	}
	if !strings.Contains(out[MaxErrors-1].Detail, "(and 4990 more errors not shown)") {
		t.Errorf("last error %q does not count the rest", out[MaxErrors-1].Detail)
	}
	if errs[0].BadValue != huge {
		t.Error("Errors changed its input")
	}
	msg := OfErrors(errs)
	if len(msg) > MaxMessage+64 {
		t.Errorf("message of %d bytes, want at most about %d", len(msg), MaxMessage)
	}
	if !strings.Contains(msg, "more bytes") {
		t.Errorf("message does not say what it cut: %q", msg[len(msg)-100:])
	}
}
