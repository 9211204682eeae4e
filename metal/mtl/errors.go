package mtl

import (
	"errors"
	"fmt"
)

// Typed errors of the device. A failed command buffer, a failed allocation
// or a missing GPU is returned wrapped in one of these, never a crash, so
// the session can say what happened (errors.Is).
var (
	// ErrUnsupported: Metal exists on macOS only (this build is for another OS).
	ErrUnsupported = errors.New("the Metal backend needs macOS")
	// ErrNoDevice: MTLCreateSystemDefaultDevice found no GPU.
	ErrNoDevice = errors.New("no Metal device on this system")
	// ErrOutOfMemory: an allocation failed, or a command buffer failed with
	// MTLCommandBufferErrorOutOfMemory.
	ErrOutOfMemory = errors.New("the GPU is out of memory")
	// ErrTimeout: the command buffer ran too long and the system stopped it
	// (MTLCommandBufferErrorTimeout).
	ErrTimeout = errors.New("the GPU work timed out")
	// ErrPageFault: a kernel read or wrote outside its buffers
	// (MTLCommandBufferErrorPageFault).
	ErrPageFault = errors.New("a GPU kernel faulted on a memory access")
	// ErrDeviceRemoved: the GPU went away (MTLCommandBufferErrorDeviceRemoved).
	ErrDeviceRemoved = errors.New("the GPU was removed")
	// ErrAccessRevoked: the system revoked GPU access, e.g. an app in the
	// background (MTLCommandBufferErrorAccessRevoked, NotPermitted).
	ErrAccessRevoked = errors.New("GPU access was revoked")
	// ErrCommandBuffer: any other failure of a command buffer.
	ErrCommandBuffer = errors.New("the GPU command buffer failed")
	// ErrCompile: the Metal compiler rejected the sources.
	ErrCompile = errors.New("metal: the Metal compiler rejected the kernels")
	// ErrAlignment: WrapMemory was given memory that is not page-aligned.
	ErrAlignment = errors.New("memory is not page-aligned")
)

// CommandBufferError is a failed command buffer: the status and
// MTLCommandBufferError code Metal reported, the NSError's description, and
// the typed error it maps to (Unwrap).
type CommandBufferError struct {
	Status int    // MTLCommandBufferStatus
	Code   int    // MTLCommandBufferError (the NSError's code)
	Desc   string // localizedDescription
	Kind   error  // ErrOutOfMemory, ErrTimeout, ...
}

func (e *CommandBufferError) Error() string {
	s := fmt.Sprintf("metal: %v (MTLCommandBufferError %d: %s)", e.Kind, e.Code, codeName(e.Code))
	if e.Desc != "" {
		s += ": " + e.Desc
	}
	return s
}

func (e *CommandBufferError) Unwrap() error { return e.Kind }

// commandBufferError is the error of a command buffer that finished with
// this status and (when it failed) this error code and description; nil
// when it completed.
func commandBufferError(status, code int, desc string) error {
	if status == statusCompleted {
		return nil
	}
	kind := ErrCommandBuffer
	switch code {
	case cbErrorOutOfMemory:
		kind = ErrOutOfMemory
	case cbErrorTimeout:
		kind = ErrTimeout
	case cbErrorPageFault:
		kind = ErrPageFault
	case cbErrorDeviceRemoved:
		kind = ErrDeviceRemoved
	case cbErrorAccessRevoked, cbErrorNotPermitted:
		kind = ErrAccessRevoked
	}
	if status != statusError && code == cbErrorNone {
		// waitUntilCompleted returned on a buffer that is neither completed
		// nor failed: should not happen; report it rather than trust it.
		desc = fmt.Sprintf("command buffer status %d after waitUntilCompleted", status)
	}
	return &CommandBufferError{Status: status, Code: code, Desc: desc, Kind: kind}
}

func codeName(code int) string {
	switch code {
	case cbErrorNone:
		return "None"
	case cbErrorInternal:
		return "Internal"
	case cbErrorTimeout:
		return "Timeout"
	case cbErrorPageFault:
		return "PageFault"
	case cbErrorAccessRevoked:
		return "AccessRevoked"
	case cbErrorNotPermitted:
		return "NotPermitted"
	case cbErrorOutOfMemory:
		return "OutOfMemory"
	case cbErrorInvalidResource:
		return "InvalidResource"
	case cbErrorMemoryless:
		return "Memoryless"
	case cbErrorDeviceRemoved:
		return "DeviceRemoved"
	case cbErrorStackOverflow:
		return "StackOverflow"
	}
	return "unknown"
}
