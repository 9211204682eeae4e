//go:build linux

package emulator

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"nibble/engine/half"
	"nibble/metal/device"
	"nibble/metal/internal/emulator/emutest"
	"nibble/metal/msl"
)

var orders = []Order{Forward, Reverse}

// testSources are the kernels under testdata, in a fixed order.
func testSources(t *testing.T) []msl.Source {
	t.Helper()
	var srcs []msl.Source
	for _, name := range []string{"basics.metal", "bugs.metal", "idioms.metal", "matrix.metal"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, msl.Source{Name: name, Text: string(b)})
	}
	return srcs
}

// lineOf is the line of the testdata file that holds marker.
func lineOf(t *testing.T, file, marker string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("%s has no %q", file, marker)
	return 0
}

var (
	sharedOnce sync.Once
	sharedDev  *Device
	sharedLib  *Library
	sharedErr  error
)

// testDevice is one device and library for the package's tests (built
// once; from the cache after the first run).
func testDevice(t *testing.T) (*Device, *Library) {
	t.Helper()
	if err := Available(); err != nil {
		emutest.Unavailable(t, err)
	}
	sharedOnce.Do(func() {
		sharedDev, sharedErr = New(Options{})
		if sharedErr != nil {
			return
		}
		start := time.Now()
		sharedLib, sharedErr = sharedDev.Build(testSources(t))
		if sharedErr == nil {
			t.Logf("library %s (cached %v) in %v", filepath.Base(sharedLib.Path()), sharedLib.Cached(), time.Since(start).Round(time.Millisecond))
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedDev, sharedLib
}

func pipe(t *testing.T, l *Library, name string, cs ...device.Constant) device.Pipeline {
	t.Helper()
	p, err := l.Pipeline(name, cs...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func f32Buffer(t *testing.T, d *Device, v []float32) device.Buffer {
	t.Helper()
	b, err := d.NewBuffer(4 * len(v))
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range v {
		binary.LittleEndian.PutUint32(b.Bytes()[4*i:], math.Float32bits(x))
	}
	t.Cleanup(b.Release)
	return b
}

func zeroBuffer(t *testing.T, d *Device, n int) device.Buffer {
	t.Helper()
	b, err := d.NewBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func f32s(b device.Buffer) []float32 {
	out := make([]float32, b.Len()/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b.Bytes()[4*i:]))
	}
	return out
}

func u32s(b device.Buffer) []uint32 {
	out := make([]uint32, b.Len()/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b.Bytes()[4*i:])
	}
	return out
}

func u32Bytes(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func randFloats(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// run submits one dispatch in the given order and syncs.
func run(t *testing.T, d *Device, o Order, x device.Dispatch) error {
	t.Helper()
	d.SetOrder(o)
	defer d.SetOrder(Forward)
	var l device.CommandList
	l.Add(x)
	if err := d.Submit(&l); err != nil {
		t.Fatal(err)
	}
	return d.Sync()
}

func grid1(groups, threads int) ([3]int, [3]int) {
	return [3]int{groups, 1, 1}, [3]int{threads, 1, 1}
}

func TestVecAdd(t *testing.T) {
	d, l := testDevice(t)
	r := rand.New(rand.NewPCG(1, 2))
	const n4 = 1000 // not a multiple of the threadgroup
	a, b := randFloats(r, 4*n4), randFloats(r, 4*n4)
	for _, o := range orders {
		c := zeroBuffer(t, d, 16*n4)
		g, th := grid1((n4+63)/64, 64)
		err := run(t, d, o, device.Dispatch{
			Pipeline: pipe(t, l, "vec_add"), Groups: g, Threads: th,
			Buffers: []device.Binding{{Index: 0, Buffer: f32Buffer(t, d, a)}, {Index: 1, Buffer: f32Buffer(t, d, b)}, {Index: 2, Buffer: c}},
			Inline:  []device.Inline{{Index: 3, Data: u32Bytes(n4)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range f32s(c) {
			if v != a[i]+b[i] {
				t.Fatalf("%v: c[%d] = %v, want %v", o, i, v, a[i]+b[i])
			}
		}
	}
}

// sumRows is the float64 sum of each row of n.
func sumRows(x []float32, n int) []float64 {
	out := make([]float64, len(x)/n)
	for i, v := range x {
		out[i/n] += float64(v)
	}
	return out
}

func TestReductions(t *testing.T) {
	d, l := testDevice(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, kernel := range []string{"reduce_tree", "reduce_simd"} {
		for _, n := range []int{32, 64, 256, 1024} {
			const groups = 5
			x := randFloats(r, groups*n)
			want := sumRows(x, n)
			for _, o := range orders {
				out := zeroBuffer(t, d, 4*groups)
				g, th := grid1(groups, n)
				err := run(t, d, o, device.Dispatch{
					Pipeline: pipe(t, l, kernel), Groups: g, Threads: th,
					Buffers:     []device.Binding{{Index: 0, Buffer: f32Buffer(t, d, x)}, {Index: 1, Buffer: out}},
					Threadgroup: []int{4 * n},
				})
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range f32s(out) {
					if math.Abs(float64(v)-want[i]) > 1e-4*math.Sqrt(float64(n)) {
						t.Errorf("%s n=%d %v: group %d sum %v, want %v", kernel, n, o, i, v, want[i])
					}
				}
			}
		}
	}
}

func TestSimdOps(t *testing.T) {
	d, l := testDevice(t)
	r := rand.New(rand.NewPCG(5, 6))
	const n = 128 // two threadgroups of two simdgroups
	x := randFloats(r, n)
	for _, o := range orders {
		out := zeroBuffer(t, d, 4*8*n)
		g, th := grid1(2, 64)
		err := run(t, d, o, device.Dispatch{
			Pipeline: pipe(t, l, "simd_ops"), Groups: g, Threads: th,
			Buffers: []device.Binding{{Index: 0, Buffer: f32Buffer(t, d, x)}, {Index: 1, Buffer: out}},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := f32s(out)
		for tid := 0; tid < n; tid++ {
			base, lane := tid&^31, tid%32
			sg := x[base : base+32]
			var sum, pre float32
			mx, mn := sg[0], sg[0]
			for l, v := range sg {
				sum += v
				mx, mn = max(mx, v), min(mn, v)
				if l < lane {
					pre += v
				}
			}
			down := sg[lane]
			if lane+5 < 32 {
				down = sg[lane+5]
			}
			want := []float32{sum, mx, sg[(lane+3)%32], down, sg[lane^1], pre, sg[7], mn}
			for k, w := range want {
				if g := got[tid*8+k]; math.Abs(float64(g-w)) > 1e-5 {
					t.Fatalf("%v: thread %d op %d = %v, want %v", o, tid, k, g, w)
				}
			}
		}
	}
}

func TestSimdSumActiveLanes(t *testing.T) {
	d, l := testDevice(t)
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i)
	}
	const n = 40 // the second simdgroup has 8 active lanes
	for _, o := range orders {
		out := zeroBuffer(t, d, 4*64)
		g, th := grid1(1, 64)
		err := run(t, d, o, device.Dispatch{
			Pipeline: pipe(t, l, "simd_sum_active"), Groups: g, Threads: th,
			Buffers: []device.Binding{{Index: 0, Buffer: f32Buffer(t, d, x)}, {Index: 1, Buffer: out}},
			Inline:  []device.Inline{{Index: 2, Data: u32Bytes(n)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := f32s(out)
		if got[0] != 496 || got[32] != 32+33+34+35+36+37+38+39 || got[n] != 0 {
			t.Errorf("%v: sums %v %v %v", o, got[0], got[32], got[n])
		}
	}
}

func TestMissingBarrier(t *testing.T) {
	d, l := testDevice(t)
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i + 1)
	}
	check := func(kernel string, o Order) (wrong int) {
		y := zeroBuffer(t, d, 4*64)
		g, th := grid1(1, 64)
		err := run(t, d, o, device.Dispatch{
			Pipeline: pipe(t, l, kernel), Groups: g, Threads: th,
			Buffers:     []device.Binding{{Index: 0, Buffer: f32Buffer(t, d, x)}, {Index: 1, Buffer: y}},
			Threadgroup: []int{256},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range f32s(y) {
			if v != float32(i) {
				wrong++
			}
		}
		return wrong
	}
	for _, o := range orders {
		if w := check("shift", o); w != 0 {
			t.Errorf("shift %v: %d wrong values", o, w)
		}
	}
	if w := check("shift_missing_barrier", Forward); w != 0 {
		t.Errorf("shift_missing_barrier forward: %d wrong values (threads in order should hide the bug)", w)
	}
	if w := check("shift_missing_barrier", Reverse); w != 63 {
		t.Errorf("shift_missing_barrier reverse: %d wrong values, want 63 (NaN from unwritten threadgroup memory)", w)
	}
}

// Each [[threadgroup(i)]] argument has its own memory, at the offsets the
// lengths give.
func TestTwoThreadgroupArguments(t *testing.T) {
	d, l := testDevice(t)
	for _, o := range orders {
		y := zeroBuffer(t, d, 4*32)
		g, th := grid1(1, 32)
		if err := run(t, d, o, device.Dispatch{Pipeline: pipe(t, l, "two_tg_args"), Groups: g, Threads: th,
			Buffers: []device.Binding{{Index: 0, Buffer: y}}, Threadgroup: []int{128, 128}}); err != nil {
			t.Fatal(err)
		}
		for i, v := range f32s(y) {
			if want := float32(1+i) - 10*float32(1+(i+1)%32); v != want {
				t.Fatalf("%v: y[%d] = %v, want %v", o, i, v, want)
			}
		}
	}
}

// A simd collective synchronises one simdgroup, not the threadgroup: a
// barrier missing between simdgroups shows in one of the two orders.
func TestMissingBarrierBetweenSimdgroups(t *testing.T) {
	d, l := testDevice(t)
	for _, o := range orders {
		y := zeroBuffer(t, d, 4*128)
		g, th := grid1(1, 128)
		if err := run(t, d, o, device.Dispatch{Pipeline: pipe(t, l, "clear_then_write"), Groups: g, Threads: th,
			Buffers: []device.Binding{{Index: 0, Buffer: y}}, Threadgroup: []int{128}}); err != nil {
			t.Fatal(err)
		}
		wrong := 0
		for _, v := range f32s(y) {
			if v != 32 {
				wrong++
			}
		}
		if want := map[Order]int{Forward: 0, Reverse: 96}[o]; wrong != want {
			t.Errorf("%v: %d threads read a cleared slot, want %d", o, wrong, want)
		}
	}
}

// runErr runs a kernel that must fail and returns the error text.
func runErr(t *testing.T, kernel string, threads int, o Order) string {
	t.Helper()
	d, l := testDevice(t)
	y := zeroBuffer(t, d, 4*threads)
	g, th := grid1(2, threads)
	err := run(t, d, o, device.Dispatch{
		Pipeline: pipe(t, l, kernel), Groups: g, Threads: th,
		Buffers: []device.Binding{{Index: 0, Buffer: y}},
	})
	if err == nil {
		t.Fatalf("%s %v: no error", kernel, o)
	}
	return err.Error()
}

func TestDivergentSimd(t *testing.T) {
	for _, o := range orders {
		msg := runErr(t, "divergent_simd", 64, o)
		for _, want := range []string{
			"divergent simd collective",
			"lanes 0-15 wait at simd_sum (bugs.metal:" + strconv.Itoa(lineOf(t, "bugs.metal", "BUG:divergent")) + ")",
			"lanes 16-31 wait at threadgroup_barrier (bugs.metal:" + strconv.Itoa(lineOf(t, "bugs.metal", "BUG:divergent-other")) + ")",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: %q\nlacks %q", o, msg, want)
			}
		}
	}
}

func TestDeadlock(t *testing.T) {
	for _, o := range orders {
		msg := runErr(t, "barrier_in_branch", 64, o)
		for _, want := range []string{
			"deadlock",
			"threads 0-15 wait at threadgroup_barrier (bugs.metal:" + strconv.Itoa(lineOf(t, "bugs.metal", "BUG:deadlock")) + ")",
			"threads 16-63 returned",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: %q\nlacks %q", o, msg, want)
			}
		}
		msg = runErr(t, "two_barriers", 8, o)
		for _, want := range []string{
			"threads 0,2,4,6 wait at threadgroup_barrier (bugs.metal:" + strconv.Itoa(lineOf(t, "bugs.metal", "BUG:even")) + ")",
			"threads 1,3,5,7 wait at threadgroup_barrier (bugs.metal:" + strconv.Itoa(lineOf(t, "bugs.metal", "BUG:odd")) + ")",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: %q\nlacks %q", o, msg, want)
			}
		}
	}
}

func TestThreadgroupMemoryLimit(t *testing.T) {
	msg := runErr(t, "too_much_threadgroup_memory", 32, Forward)
	want := "bugs.metal:" + strconv.Itoa(lineOf(t, "bugs.metal", "BUG:tgmem")) + ": threadgroup memory of 36000 bytes exceeds"
	if !strings.Contains(msg, want) {
		t.Errorf("%q\nlacks %q", msg, want)
	}
}

// After a failed dispatch the rest of its list is skipped, Sync reports the
// error once, and the device goes on working.
func TestErrorEndsList(t *testing.T) {
	d, l := testDevice(t)
	y := zeroBuffer(t, d, 4*64)
	x := f32Buffer(t, d, []float32{1, 2, 3, 4})
	out := zeroBuffer(t, d, 16)
	g, th := grid1(1, 64)
	var list device.CommandList
	list.Add(device.Dispatch{Pipeline: pipe(t, l, "barrier_in_branch"), Groups: g, Threads: th, Buffers: []device.Binding{{Index: 0, Buffer: y}}})
	list.Add(device.Dispatch{Pipeline: pipe(t, l, "times_f32_2"), Groups: [3]int{1, 1, 1}, Threads: [3]int{4, 1, 1},
		Buffers: []device.Binding{{Index: 0, Buffer: x}, {Index: 1, Buffer: out}}})
	if err := d.Submit(&list); err != nil {
		t.Fatal(err)
	}
	err := d.Sync()
	if err == nil || !strings.Contains(err.Error(), "dispatch 0 of 2 (barrier_in_branch)") {
		t.Fatalf("error %v", err)
	}
	if got := f32s(out); got[0] != 0 {
		t.Errorf("the dispatch after the failed one ran: %v", got)
	}
	if err := d.Sync(); err != nil {
		t.Errorf("second Sync: %v", err)
	}
	list.Reset()
	list.Add(device.Dispatch{Pipeline: pipe(t, l, "times_f32_2"), Groups: [3]int{1, 1, 1}, Threads: [3]int{4, 1, 1},
		Buffers: []device.Binding{{Index: 0, Buffer: x}, {Index: 1, Buffer: out}}})
	if err := d.Submit(&list); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := f32s(out); got[3] != 8 {
		t.Errorf("times_f32_2 after the error: %v", got)
	}
}

func TestPositions(t *testing.T) {
	d, l := testDevice(t)
	groups, threads := [3]int{3, 2, 2}, [3]int{8, 4, 2} // 64 threads per group
	total := 3 * 2 * 2 * 64
	for _, o := range orders {
		out := zeroBuffer(t, d, 4*8*total)
		if err := run(t, d, o, device.Dispatch{Pipeline: pipe(t, l, "positions"), Groups: groups, Threads: threads,
			Buffers: []device.Binding{{Index: 0, Buffer: out}}}); err != nil {
			t.Fatal(err)
		}
		got := u32s(out)
		gx, gy := uint32(groups[0]*threads[0]), uint32(groups[1]*threads[1])
		for i := 0; i < total; i++ {
			o8 := got[i*8 : i*8+8]
			if flat := o8[0] + gx*(o8[1]+gy*o8[2]); flat != uint32(i) || o8[3] != 1 || o8[4] != 1 || o8[5] != 1 || o8[6] != 1 || o8[7] != 32 {
				t.Fatalf("%v: thread %d: %v", o, i, o8)
			}
		}
	}
}

func TestTypes(t *testing.T) {
	d, l := testDevice(t)
	r := rand.New(rand.NewPCG(7, 8))
	const n = 32
	hs := make([]uint16, 4*n)
	in := zeroBuffer(t, d, 8*n)
	for i := range hs {
		hs[i] = half.FromFloat32(float32(r.NormFloat64()))
		binary.LittleEndian.PutUint16(in.Bytes()[2*i:], hs[i])
	}
	out := zeroBuffer(t, d, 4*8*n)
	g, th := grid1(1, n)
	if err := run(t, d, Forward, device.Dispatch{Pipeline: pipe(t, l, "types"), Groups: g, Threads: th,
		Buffers: []device.Binding{{Index: 0, Buffer: in}, {Index: 1, Buffer: out}}}); err != nil {
		t.Fatal(err)
	}
	got := f32s(out)
	for i := 0; i < n; i++ {
		f := [4]float32{}
		for k := range f {
			f[k] = half.ToFloat32(hs[4*i+k])
		}
		want := []float32{
			f[0] + f[1],
			half.Round(f[0] * 2),
			f[0] + 2*f[1] + 3*f[2],
			-f[3],
			max(f[0], 0),
			min(max(f[1], -1), 1),
			float32(popcount(math.Float32bits(f[2]))),
			f[2] + 12 + 16,
		}
		for k, w := range want {
			if g := got[i*8+k]; math.Abs(float64(g-w)) > 1e-6*(1+math.Abs(float64(w))) {
				t.Errorf("thread %d value %d = %v, want %v", i, k, g, w)
			}
		}
	}
}

func popcount(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func TestAtomics(t *testing.T) {
	d, l := testDevice(t)
	for _, o := range orders {
		counter, maxid := zeroBuffer(t, d, 4), zeroBuffer(t, d, 4)
		g, th := grid1(100, 96)
		if err := run(t, d, o, device.Dispatch{Pipeline: pipe(t, l, "count"), Groups: g, Threads: th,
			Buffers: []device.Binding{{Index: 0, Buffer: counter}, {Index: 1, Buffer: maxid}}}); err != nil {
			t.Fatal(err)
		}
		if c, m := u32s(counter)[0], u32s(maxid)[0]; c != 9600 || m != 9599 {
			t.Errorf("%v: count %d, max id %d; want 9600, 9599", o, c, m)
		}
	}
}

func TestFunctionConstants(t *testing.T) {
	d, l := testDevice(t)
	if _, err := l.Pipeline("scale_bias"); err == nil || !strings.Contains(err.Error(), "function constant fc_scale (index 0, basics.metal:") {
		t.Errorf("a missing constant: %v", err)
	}
	if _, err := l.Pipeline("scale_bias", device.Constant{Index: 0, Value: int32(2)}); err == nil || !strings.Contains(err.Error(), "fc_scale is float, not int32") {
		t.Errorf("a constant of the wrong type: %v", err)
	}
	if _, err := l.Pipeline("scale_bias", device.Constant{Index: 9, Value: true}); err == nil {
		t.Error("an unknown constant index was accepted")
	}
	x := f32Buffer(t, d, []float32{1, 2, 3, 4})
	for _, c := range []struct {
		cs   []device.Constant
		want float32 // y[3]
	}{
		{[]device.Constant{{Index: 0, Value: float32(2)}}, 8},
		{[]device.Constant{{Index: 0, Value: float32(2)}, {Index: 1, Value: false}}, 8},
		{[]device.Constant{{Index: 0, Value: float32(0.5)}, {Index: 1, Value: true}}, 3},
	} {
		y := zeroBuffer(t, d, 16)
		if err := run(t, d, Forward, device.Dispatch{Pipeline: pipe(t, l, "scale_bias", c.cs...), Groups: [3]int{1, 1, 1}, Threads: [3]int{4, 1, 1},
			Buffers: []device.Binding{{Index: 0, Buffer: x}, {Index: 1, Buffer: y}}}); err != nil {
			t.Fatal(err)
		}
		if got := f32s(y)[3]; got != c.want {
			t.Errorf("constants %v: y[3] = %v, want %v", c.cs, got, c.want)
		}
	}
}

func TestHostNames(t *testing.T) {
	d, l := testDevice(t)
	x := f32Buffer(t, d, []float32{1, 2, 3, 4})
	y := zeroBuffer(t, d, 16)
	if err := run(t, d, Forward, device.Dispatch{Pipeline: pipe(t, l, "times_f32_2"), Groups: [3]int{1, 1, 1}, Threads: [3]int{4, 1, 1},
		Buffers: []device.Binding{{Index: 0, Buffer: x}, {Index: 1, Buffer: y}}}); err != nil {
		t.Fatal(err)
	}
	if got := f32s(y); got[3] != 8 {
		t.Errorf("times_f32_2: %v", got)
	}
	h := zeroBuffer(t, d, 8)
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint16(h.Bytes()[2*i:], half.FromFloat32(float32(i)))
	}
	hy := zeroBuffer(t, d, 8)
	if err := run(t, d, Forward, device.Dispatch{Pipeline: pipe(t, l, "times_f16_3"), Groups: [3]int{1, 1, 1}, Threads: [3]int{4, 1, 1},
		Buffers: []device.Binding{{Index: 0, Buffer: h}, {Index: 1, Buffer: hy}}}); err != nil {
		t.Fatal(err)
	}
	if got := half.ToFloat32(binary.LittleEndian.Uint16(hy.Bytes()[6:])); got != 9 {
		t.Errorf("times_f16_3: y[3] = %v, want 9", got)
	}
	if _, err := l.Pipeline("times"); err == nil {
		t.Error("a kernel template without a host name was found by its function name")
	}
}

// Submit refuses what a Metal validation layer would, before anything runs.
func TestSubmitValidation(t *testing.T) {
	d, l := testDevice(t)
	y := zeroBuffer(t, d, 64)
	p := pipe(t, l, "times_f32_2")
	one := [3]int{1, 1, 1}
	for _, c := range []struct {
		d    device.Dispatch
		want string
	}{
		{device.Dispatch{Pipeline: p, Groups: one, Threads: one, Buffers: []device.Binding{{Index: 1, Buffer: y}}}, "buffer(0) (x) is not bound"},
		{device.Dispatch{Pipeline: p, Groups: one, Threads: [3]int{2048, 1, 1}, Buffers: []device.Binding{{Index: 0, Buffer: y}, {Index: 1, Buffer: y}}}, "2048 threads per threadgroup"},
		{device.Dispatch{Pipeline: p, Groups: [3]int{0, 1, 1}, Threads: one}, "bad grid"},
		{device.Dispatch{Pipeline: p, Groups: one, Threads: one, Buffers: []device.Binding{{Index: 0, Buffer: y, Offset: 64}, {Index: 1, Buffer: y}}}, "offset 64"},
		{device.Dispatch{Pipeline: pipe(t, l, "reduce_tree"), Groups: one, Threads: one, Buffers: []device.Binding{{Index: 0, Buffer: y}, {Index: 1, Buffer: y}}}, "threadgroup(0) (buf) has no memory length"},
		{device.Dispatch{Pipeline: pipe(t, l, "reduce_tree"), Groups: one, Threads: one, Buffers: []device.Binding{{Index: 0, Buffer: y}, {Index: 1, Buffer: y}}, Threadgroup: []int{40000}}, "threadgroup memory"},
	} {
		var list device.CommandList
		list.Add(c.d)
		err := d.Submit(&list)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v", c.want, err)
		}
	}
	released := zeroBuffer(t, d, 16)
	released.Release()
	var list device.CommandList
	list.Add(device.Dispatch{Pipeline: p, Groups: one, Threads: one, Buffers: []device.Binding{{Index: 0, Buffer: released}, {Index: 1, Buffer: y}}})
	if err := d.Submit(&list); err == nil {
		t.Error("a released buffer was accepted")
	}
}

// WrapMemory runs kernels on Go-owned memory, without copies.
func TestWrapMemory(t *testing.T) {
	d, l := testDevice(t)
	mem := make([]byte, 32)
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint32(mem[4*i:], math.Float32bits(float32(i+1)))
	}
	b, err := d.WrapMemory(mem)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if err := run(t, d, Forward, device.Dispatch{Pipeline: pipe(t, l, "times_f32_2"), Groups: [3]int{1, 1, 1}, Threads: [3]int{4, 1, 1},
		Buffers: []device.Binding{{Index: 0, Buffer: b}, {Index: 1, Buffer: b, Offset: 16}}}); err != nil {
		t.Fatal(err)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(mem[28:])); got != 8 {
		t.Errorf("wrapped memory: %v, want 8", got)
	}
}

// The second build of the same sources comes from the cache, and a
// compile error names the .metal file and line.
func TestBuildCacheAndErrors(t *testing.T) {
	d, _ := testDevice(t)
	start := time.Now()
	l, err := d.Build(testSources(t))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Cached() {
		t.Error("the second build of the same sources was not cached")
	}
	t.Logf("warm build: %v", time.Since(start).Round(time.Millisecond))
	_, err = d.Build([]msl.Source{{Name: "broken.metal", Text: "#include <metal_stdlib>\nusing namespace metal;\n\nkernel void k(device float * y [[buffer(0)]]) {\n    y[0] = undefined_name;\n}\n"}})
	if err == nil || !strings.Contains(err.Error(), "broken.metal:5:") {
		t.Errorf("compile error: %v", err)
	}
	_, err = d.Build([]msl.Source{{Name: "noattr.metal", Text: "kernel void k(device float * y) {}\n"}})
	if err == nil || !strings.Contains(err.Error(), "noattr.metal:1:") {
		t.Errorf("translation error: %v", err)
	}
}

// The ucontext fallback (for non-x86-64 hosts) runs the same kernels.
func TestUcontextFallback(t *testing.T) {
	if err := Available(); err != nil {
		emutest.Unavailable(t, err)
	}
	d, err := New(Options{CFlags: []string{"-DMSL_UCONTEXT=1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := d.Build(testSources(t))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 10))
	x := randFloats(r, 4*256)
	want := sumRows(x, 256)
	for _, o := range orders {
		out := zeroBuffer(t, d, 16)
		g, th := grid1(4, 256)
		if err := run(t, d, o, device.Dispatch{Pipeline: pipe(t, l, "reduce_simd"), Groups: g, Threads: th,
			Buffers: []device.Binding{{Index: 0, Buffer: f32Buffer(t, d, x)}, {Index: 1, Buffer: out}}}); err != nil {
			t.Fatal(err)
		}
		for i, v := range f32s(out) {
			if math.Abs(float64(v)-want[i]) > 1e-3 {
				t.Errorf("%v: group %d sum %v, want %v", o, i, v, want[i])
			}
		}
	}
	if msg := runErrOn(t, d, l, "barrier_in_branch"); !strings.Contains(msg, "deadlock") {
		t.Errorf("ucontext deadlock report: %q", msg)
	}
}

func runErrOn(t *testing.T, d *Device, l *Library, kernel string) string {
	y := zeroBuffer(t, d, 256)
	g, th := grid1(1, 64)
	err := run(t, d, Forward, device.Dispatch{Pipeline: pipe(t, l, kernel), Groups: g, Threads: th, Buffers: []device.Binding{{Index: 0, Buffer: y}}})
	if err == nil {
		t.Fatalf("%s: no error", kernel)
	}
	return err.Error()
}

func TestIdioms(t *testing.T) {
	d, l := testDevice(t)
	x, y := zeroBuffer(t, d, 18), zeroBuffer(t, d, 4*96)
	binary.LittleEndian.PutUint16(x.Bytes(), half.FromFloat32(1)) // d = 1, codes 0
	if err := run(t, d, Forward, device.Dispatch{Pipeline: pipe(t, l, "idioms"), Groups: [3]int{1, 1, 1}, Threads: [3]int{32, 1, 1},
		Buffers: []device.Binding{{Index: 0, Buffer: x}, {Index: 1, Buffer: y}}}); err != nil {
		t.Fatal(err)
	}
	got := f32s(y)
	for lane := 0; lane < 32; lane++ {
		// Every dequantized value is -8 (d·0 - 8d): a column sums to -32;
		// then +1 below lane 16, + length(3, 4) = 5.
		want := float32(-32*32 + 5)
		if lane < 16 {
			want++
		}
		if got[32+lane] != want || got[64+lane] != -8 || math.IsNaN(float64(got[lane])) {
			t.Fatalf("lane %d: %v %v %v", lane, got[lane], got[32+lane], got[64+lane])
		}
	}
}
