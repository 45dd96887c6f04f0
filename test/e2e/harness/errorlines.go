package harness

import (
	"regexp"
	"strings"
	"time"

	"github.com/loutres/juneau/test/framework"
)

// checkNoErrorLines fails the test when a component (controller, webhook, node agent)
// logged at error level: in a healthy cluster none does (a retried conflict or a cache
// that lags is no error). A test that breaks something on purpose scopes the check to
// the healthy part of its run with ExpectRefusals: lines logged in those periods (the API
// server gone or restarting, test/faults) are expected. An agent replaced by StartAgent
// (a crash, a reboot) is not checked, its successor is.
func (c *Cluster) checkNoErrorLines() {
	for _, comp := range c.components() {
		for _, line := range strings.Split(comp.Log(), "\n") {
			if klogErrorLine.MatchString(line) && !c.refusalExpected(line) && !canceledByStop(comp, line) {
				c.t.Errorf("%s logged at error level in a healthy cluster: %s", comp.Name, line)
			}
		}
	}
}

// canceledByStop reports whether line is a request cut short by the test stopping the
// component: client-go's Lease renewal, for one, logs its in-flight update as an error
// when its context ends. Only such lines, logged once the stop began, are let through.
func canceledByStop(comp *framework.Component, line string) bool {
	since := comp.StoppingSince()
	if since.IsZero() || !strings.Contains(line, "context canceled") {
		return false
	}
	at, ok := logTime(line)
	return ok && !at.Before(since.Truncate(time.Microsecond))
}

// klogErrorLine is a klog line of severity error or fatal.
var klogErrorLine = regexp.MustCompile(`^[EF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} `)

var klogStamp = regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6})`)

// refusalExpected reports whether a log line was written in a period of ExpectRefusals.
func (c *Cluster) refusalExpected(line string) bool {
	at, ok := logTime(line)
	if !ok {
		return false
	}
	for _, r := range c.refusals {
		if !at.Before(r[0]) && !at.After(r[1]) {
			return true
		}
	}
	return false
}

// logTime is when a klog line was written (this year: klog leaves the year out).
func logTime(line string) (time.Time, bool) {
	m := klogStamp.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}, false
	}
	at, err := time.ParseInLocation("0102 15:04:05.000000", m[1], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return at.AddDate(time.Now().Year(), 0, 0), true
}
