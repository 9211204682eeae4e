//go:build darwin

package mtl

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// The Objective-C runtime and Metal, bound once through purego
// (no cgo). Every message goes through objc_msgSend with a Go function type
// that matches the selector's declaration in selectors.go; purego lays the
// arguments out by the arm64 (and amd64) C calling convention, including
// MTLSize, a 24-byte struct passed by reference on arm64.
var rt struct {
	once sync.Once
	err  error

	sels    [numSelectors]objc.SEL
	classes map[string]objc.Class

	createSystemDefaultDevice func() objc.ID
	poolPush                  func() uintptr
	poolPop                   func(uintptr)

	// Typed objc_msgSend entry points, one per signature shape.
	msg         func(recv objc.ID, s objc.SEL) objc.ID
	msgID       func(recv objc.ID, s objc.SEL, a objc.ID) objc.ID
	msgUint     func(recv objc.ID, s objc.SEL) uint64
	msgInt      func(recv objc.ID, s objc.SEL) int64
	msgBool     func(recv objc.ID, s objc.SEL) bool
	msgF64      func(recv objc.ID, s objc.SEL) float64
	msgPtr      func(recv objc.ID, s objc.SEL) unsafe.Pointer
	msgString   func(recv objc.ID, s objc.SEL) string
	msgSetUint  func(recv objc.ID, s objc.SEL, v uint64)
	msgSetBool  func(recv objc.ID, s objc.SEL, v bool)
	msgSetInt   func(recv objc.ID, s objc.SEL, v int64)
	msgCString  func(recv objc.ID, s objc.SEL, str *byte) objc.ID
	msgRespond  func(recv objc.ID, s objc.SEL, q objc.SEL) bool
	msgErr1     func(recv objc.ID, s objc.SEL, a objc.ID, err *objc.ID) objc.ID
	msgErr2     func(recv objc.ID, s objc.SEL, a, b objc.ID, err *objc.ID) objc.ID
	msgNewBuf   func(recv objc.ID, s objc.SEL, length, options uint64) objc.ID
	msgNoCopy   func(recv objc.ID, s objc.SEL, p unsafe.Pointer, length, options uint64, deallocator uintptr) objc.ID
	msgSetConst func(recv objc.ID, s objc.SEL, value unsafe.Pointer, typ, index uint64)
	msgSetBuf   func(recv objc.ID, s objc.SEL, buf objc.ID, offset, index uint64)
	msgSetBytes func(recv objc.ID, s objc.SEL, p unsafe.Pointer, length, index uint64)
	msgSetTG    func(recv objc.ID, s objc.SEL, length, index uint64)
	msgDispatch func(recv objc.ID, s objc.SEL, groups, threads mtlSize)
}

// mtlSize is MTLSize (Metal/MTLTypes.h): three NSUIntegers.
type mtlSize struct{ Width, Height, Depth uint64 }

const (
	libobjc        = "/usr/lib/libobjc.A.dylib"
	coreGraphics   = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"
	metalFramework = "/System/Library/Frameworks/Metal.framework/Metal"
)

func bind() error {
	rt.once.Do(func() { rt.err = bindOnce() })
	return rt.err
}

func bindOnce() error {
	objcLib, err := purego.Dlopen(libobjc, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("%w: load libobjc: %v", ErrNoDevice, err)
	}
	// CoreGraphics first: Apple's documentation of
	// MTLCreateSystemDefaultDevice says that on macOS a process must link
	// Core Graphics to get the default device, which command-line tools
	// usually have to do explicitly.
	if _, err := purego.Dlopen(coreGraphics, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		return fmt.Errorf("%w: load CoreGraphics: %v", ErrNoDevice, err)
	}
	metal, err := purego.Dlopen(metalFramework, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("%w: load Metal.framework: %v", ErrNoDevice, err)
	}
	purego.RegisterLibFunc(&rt.createSystemDefaultDevice, metal, "MTLCreateSystemDefaultDevice")
	purego.RegisterLibFunc(&rt.poolPush, objcLib, "objc_autoreleasePoolPush")
	purego.RegisterLibFunc(&rt.poolPop, objcLib, "objc_autoreleasePoolPop")
	send, err := purego.Dlsym(objcLib, "objc_msgSend")
	if err != nil {
		return fmt.Errorf("%w: objc_msgSend: %v", ErrNoDevice, err)
	}
	for _, fn := range []any{
		&rt.msg, &rt.msgID, &rt.msgUint, &rt.msgInt, &rt.msgBool, &rt.msgF64, &rt.msgPtr, &rt.msgString,
		&rt.msgSetUint, &rt.msgSetBool, &rt.msgSetInt, &rt.msgCString, &rt.msgRespond, &rt.msgErr1, &rt.msgErr2,
		&rt.msgNewBuf, &rt.msgNoCopy, &rt.msgSetConst, &rt.msgSetBuf, &rt.msgSetBytes, &rt.msgSetTG, &rt.msgDispatch,
	} {
		purego.RegisterFunc(fn, send)
	}
	for i, s := range selectors {
		rt.sels[i] = objc.RegisterName(s.Name)
	}
	rt.classes = map[string]objc.Class{}
	for _, name := range classes {
		c := objc.GetClass(name)
		if c == 0 && name != "MTLResidencySetDescriptor" { // macOS 15+
			return fmt.Errorf("%w: Objective-C class %s not found", ErrNoDevice, name)
		}
		rt.classes[name] = c
	}
	return nil
}

// sl is the registered selector of a table entry.
func sl(s sel) objc.SEL { return rt.sels[s] }

// withPool runs f inside an autorelease pool on one OS thread. Metal and
// Foundation hand back autoreleased objects (commandBuffer,
// computeCommandEncoder, NSError, stringWithUTF8String:); outside a pool
// they would pile up on the thread until it exits, which for Go's long-lived
// threads is never. objc_autoreleasePoolPush and Pop must run on the same
// thread, and Go may move a goroutine between threads at any call, so the
// goroutine is locked to its thread for the pool's duration (runtime.LockOSThread).
// Metal itself does not need a particular thread: MTLDevice and
// MTLCommandQueue are thread-safe, and a command buffer or encoder is used
// by one goroutine at a time (the device.Device contract).
func withPool(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := rt.poolPush()
	defer rt.poolPop(p)
	f()
}

// newObject is [[Class alloc] init] (owned: release it).
func newObject(class string) objc.ID {
	c := rt.classes[class]
	if c == 0 {
		return 0
	}
	return rt.msg(rt.msg(objc.ID(c), sl(selAlloc)), sl(selInit))
}

func release(o objc.ID) {
	if o != 0 {
		rt.msg(o, sl(selRelease))
	}
}

func retain(o objc.ID) objc.ID {
	if o != 0 {
		rt.msg(o, sl(selRetain))
	}
	return o
}

// nsString is an autoreleased NSString of s (call inside withPool).
func nsString(s string) objc.ID {
	b := append([]byte(s), 0)
	str := rt.msgCString(objc.ID(rt.classes["NSString"]), sl(selStringWithUTF8String), &b[0])
	runtime.KeepAlive(b)
	return str
}

// goString copies an NSString.
func goString(str objc.ID) string {
	if str == 0 {
		return ""
	}
	return rt.msgString(str, sl(selUTF8String))
}

// nsErrorText is an NSError's code and localizedDescription.
func nsErrorText(e objc.ID) (int, string) {
	if e == 0 {
		return 0, ""
	}
	return int(rt.msgInt(e, sl(selCode))), goString(rt.msg(e, sl(selLocalizedDescription)))
}

func respondsTo(o objc.ID, s sel) bool {
	return o != 0 && rt.msgRespond(o, sl(selRespondsToSelector), sl(s))
}
