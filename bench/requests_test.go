package main

import "testing"

func TestRequestsPer(t *testing.T) {
	before := map[requestKey]float64{{Verb: "POST", Resource: "allocationclaims", Code: "201"}: 100}
	after := map[requestKey]float64{
		{Verb: "POST", Resource: "allocationclaims", Code: "201"}: 600,
		{Verb: "POST", Resource: "allocationclaims", Code: "409"}: 250,
		{Verb: "PUT", Resource: "elasticips/status", Code: "200"}: 500,
		{Verb: "GET", Resource: "addresspools", Code: "200"}:      1, // 0.002 per unit: left out of the list
	}
	got := requestsPer(before, after, 500)
	want := "2.50 (POST allocationclaims 201 1.00, PUT elasticips/status 200 1.00, POST allocationclaims 409 0.50)"
	if got != want {
		t.Errorf("requestsPer = %q\nwant          %q", got, want)
	}
}
