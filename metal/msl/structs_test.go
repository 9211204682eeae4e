package msl

import (
	"reflect"
	"testing"
)

func TestStructs(t *testing.T) {
	got, err := Structs([]Source{{Name: "a.metal", Text: `
#define N 4
struct args {
    uint  n;        // a comment
    float a, b;
    ulong off;
    half  h[N*2];
};

template <typename T>
kernel void k(constant args & a [[buffer(0)]]) {
    struct local { int x; };
}

struct plane {
    static inline bool quick() { return true; }
    device const char * codes;
    static constant int width = 4;
};
`}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Struct{
		{Name: "args", File: "a.metal", Line: 3, Fields: []Field{
			{Name: "n", Type: "uint", Line: 4},
			{Name: "a", Type: "float", Line: 5},
			{Name: "b", Type: "float", Line: 5},
			{Name: "off", Type: "ulong", Line: 6},
			{Name: "h", Type: "half", Len: "N*2", Line: 7},
		}},
		{Name: "plane", File: "a.metal", Line: 15, Fields: []Field{
			{Name: "codes", Type: "device const char *", Line: 17},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"struct s { uint x = 1; };", "struct s { uint x : 3; };", "struct s { uint x", "struct s { uint x[2][3]; };"} {
		if _, err := Structs([]Source{{Name: "b.metal", Text: bad}}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
