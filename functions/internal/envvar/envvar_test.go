package envvar

import "testing"

func TestBool(t *testing.T) {
	for v, want := range map[string]bool{"": false, "false": false, "true": true} {
		if got, err := Bool("ADMITFN_X", v); err != nil || got != want {
			t.Errorf("%q: %v, %v", v, got, err)
		}
	}
	// strconv.ParseBool's other spellings are refused, here as everywhere.
	for _, v := range []string{"1", "TRUE", "t", "yes", " true"} {
		if _, err := Bool("ADMITFN_X", v); err == nil || err.Error() != `ADMITFN_X="`+v+`": want true or false` {
			t.Errorf("%q: %v", v, err)
		}
	}
}
