package kafkaio

import (
	"strings"
	"testing"

	"koala/dataplane/control"
)

func TestFetchOptionsParams(t *testing.T) {
	for _, tc := range []struct {
		params  map[string]string
		wantErr string
	}{
		{params: nil},
		{params: map[string]string{control.ParamSourceFetchMinBytes: "1", control.ParamSourceFetchMaxWaitMs: "10000"}},
		{params: map[string]string{control.ParamSourceFetchMinBytes: ""}},
		{params: map[string]string{control.ParamSourceFetchMinBytes: "0"}, wantErr: "SourceFetchMinBytes \"0\": want a whole number of bytes between 1 and"},
		{params: map[string]string{control.ParamSourceFetchMinBytes: "64KB"}, wantErr: "SourceFetchMinBytes \"64KB\""},
		{params: map[string]string{control.ParamSourceFetchMinBytes: "67108865"}, wantErr: "SourceFetchMinBytes"},
		{params: map[string]string{control.ParamSourceFetchMaxWaitMs: "-5"}, wantErr: "SourceFetchMaxWaitMs \"-5\": want a whole number of milliseconds between 1 and 10000"},
		{params: map[string]string{control.ParamSourceFetchMaxWaitMs: "2.5"}, wantErr: "SourceFetchMaxWaitMs"},
	} {
		opts, err := FetchOptions(control.JobSpec{Params: tc.params})
		if tc.wantErr == "" {
			if err != nil || len(opts) != 2 {
				t.Errorf("params %v: got %d options, err %v; want 2 options", tc.params, len(opts), err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("params %v: err %v, want it to contain %q", tc.params, err, tc.wantErr)
		}
	}
}
