package mtl

// The Objective-C messages the darwin device layer sends, one entry each:
// the selector as Apple's headers spell it, the receiver (class or
// protocol), the argument and return types as the header declares them
// (qualifiers such as nullable dropped, spaces only between words), and
// the header. The darwin code names a message only through these constants
// (sels[selX] is the registered SEL), so every message it can send is
// here; selectors_test.go checks each entry against the declarations quoted
// from the headers (Apple's Metal and Foundation headers, as reproduced by
// Apple's metal-cpp, whose MTLHeaderBridge.hpp spells every selector), and
// that every call in the darwin files passes as many arguments as the
// selector has colons.

type sel int

const (
	// NSObject (objc/NSObject.h)
	selAlloc sel = iota
	selInit
	selRetain
	selRelease
	selRespondsToSelector

	// NSString, NSError (Foundation)
	selStringWithUTF8String
	selUTF8String
	selLocalizedDescription
	selCode

	// MTLDevice (Metal/MTLDevice.h)
	selDeviceName
	selNewCommandQueue
	selNewBufferWithLength
	selNewBufferWithBytesNoCopy
	selNewLibraryWithSource
	selNewComputePipelineStateWithFunction
	selMaxBufferLength
	selRecommendedMaxWorkingSetSize
	selCurrentAllocatedSize
	selHasUnifiedMemory
	selNewResidencySetWithDescriptor

	// MTLCompileOptions (Metal/MTLLibrary.h)
	selSetFastMathEnabled
	selSetMathMode
	selSetLanguageVersion

	// MTLLibrary (Metal/MTLLibrary.h)
	selNewFunctionWithNameConstantValues

	// MTLFunctionConstantValues (Metal/MTLFunctionConstantValues.h)
	selSetConstantValueTypeAtIndex

	// MTLComputePipelineState (Metal/MTLComputePipeline.h)
	selMaxTotalThreadsPerThreadgroup

	// MTLCommandQueue (Metal/MTLCommandQueue.h)
	selCommandBuffer
	selAddResidencySet

	// MTLCommandBuffer (Metal/MTLCommandBuffer.h)
	selComputeCommandEncoder
	selCommandBufferCommit
	selWaitUntilCompleted
	selStatus
	selError
	selGPUStartTime
	selGPUEndTime

	// MTLComputeCommandEncoder (Metal/MTLComputeCommandEncoder.h) and
	// MTLCommandEncoder (Metal/MTLCommandEncoder.h)
	selSetComputePipelineState
	selSetBufferOffsetAtIndex
	selSetBytesLengthAtIndex
	selSetThreadgroupMemoryLengthAtIndex
	selDispatchThreadgroups
	selEndEncoding

	// MTLBuffer (Metal/MTLBuffer.h)
	selContents

	// MTLResidencySetDescriptor and MTLResidencySet (Metal/MTLResidencySet.h, macOS 15)
	selSetInitialCapacity
	selSetLabel
	selAddAllocation
	selRemoveAllocation
	selResidencyCommit
	selRequestResidency
	selEndResidency
	selAllocatedSize

	numSelectors
)

// Selector is one Objective-C message.
type Selector struct {
	Name   string   // as in the header, e.g. "setBuffer:offset:atIndex:"
	Recv   string   // the class or protocol that declares it
	Args   []string // one per colon
	Ret    string
	Header string
}

var selectors = [numSelectors]Selector{
	selAlloc:              {"alloc", "NSObject", nil, "instancetype", "objc/NSObject.h"},
	selInit:               {"init", "NSObject", nil, "instancetype", "objc/NSObject.h"},
	selRetain:             {"retain", "NSObject", nil, "instancetype", "objc/NSObject.h"},
	selRelease:            {"release", "NSObject", nil, "oneway void", "objc/NSObject.h"},
	selRespondsToSelector: {"respondsToSelector:", "NSObject", []string{"SEL"}, "BOOL", "objc/NSObject.h"},

	selStringWithUTF8String: {"stringWithUTF8String:", "NSString", []string{"const char*"}, "instancetype", "Foundation/NSString.h"},
	selUTF8String:           {"UTF8String", "NSString", nil, "const char*", "Foundation/NSString.h"},
	selLocalizedDescription: {"localizedDescription", "NSError", nil, "NSString*", "Foundation/NSError.h"},
	selCode:                 {"code", "NSError", nil, "NSInteger", "Foundation/NSError.h"},

	selDeviceName:                          {"name", "MTLDevice", nil, "NSString*", "Metal/MTLDevice.h"},
	selNewCommandQueue:                     {"newCommandQueue", "MTLDevice", nil, "id<MTLCommandQueue>", "Metal/MTLDevice.h"},
	selNewBufferWithLength:                 {"newBufferWithLength:options:", "MTLDevice", []string{"NSUInteger", "MTLResourceOptions"}, "id<MTLBuffer>", "Metal/MTLDevice.h"},
	selNewBufferWithBytesNoCopy:            {"newBufferWithBytesNoCopy:length:options:deallocator:", "MTLDevice", []string{"void*", "NSUInteger", "MTLResourceOptions", "void(^)(void*pointer,NSUInteger length)"}, "id<MTLBuffer>", "Metal/MTLDevice.h"},
	selNewLibraryWithSource:                {"newLibraryWithSource:options:error:", "MTLDevice", []string{"NSString*", "MTLCompileOptions*", "NSError**"}, "id<MTLLibrary>", "Metal/MTLDevice.h"},
	selNewComputePipelineStateWithFunction: {"newComputePipelineStateWithFunction:error:", "MTLDevice", []string{"id<MTLFunction>", "NSError**"}, "id<MTLComputePipelineState>", "Metal/MTLDevice.h"},
	selMaxBufferLength:                     {"maxBufferLength", "MTLDevice", nil, "NSUInteger", "Metal/MTLDevice.h"},
	selRecommendedMaxWorkingSetSize:        {"recommendedMaxWorkingSetSize", "MTLDevice", nil, "uint64_t", "Metal/MTLDevice.h"},
	selCurrentAllocatedSize:                {"currentAllocatedSize", "MTLDevice", nil, "NSUInteger", "Metal/MTLDevice.h"},
	selHasUnifiedMemory:                    {"hasUnifiedMemory", "MTLDevice", nil, "BOOL", "Metal/MTLDevice.h"},
	selNewResidencySetWithDescriptor:       {"newResidencySetWithDescriptor:error:", "MTLDevice", []string{"MTLResidencySetDescriptor*", "NSError**"}, "id<MTLResidencySet>", "Metal/MTLDevice.h"},

	selSetFastMathEnabled: {"setFastMathEnabled:", "MTLCompileOptions", []string{"BOOL"}, "void", "Metal/MTLLibrary.h"},
	selSetMathMode:        {"setMathMode:", "MTLCompileOptions", []string{"MTLMathMode"}, "void", "Metal/MTLLibrary.h"},
	selSetLanguageVersion: {"setLanguageVersion:", "MTLCompileOptions", []string{"MTLLanguageVersion"}, "void", "Metal/MTLLibrary.h"},

	selNewFunctionWithNameConstantValues: {"newFunctionWithName:constantValues:error:", "MTLLibrary", []string{"NSString*", "MTLFunctionConstantValues*", "NSError**"}, "id<MTLFunction>", "Metal/MTLLibrary.h"},

	selSetConstantValueTypeAtIndex: {"setConstantValue:type:atIndex:", "MTLFunctionConstantValues", []string{"const void*", "MTLDataType", "NSUInteger"}, "void", "Metal/MTLFunctionConstantValues.h"},

	selMaxTotalThreadsPerThreadgroup: {"maxTotalThreadsPerThreadgroup", "MTLComputePipelineState", nil, "NSUInteger", "Metal/MTLComputePipeline.h"},

	selCommandBuffer:   {"commandBuffer", "MTLCommandQueue", nil, "id<MTLCommandBuffer>", "Metal/MTLCommandQueue.h"},
	selAddResidencySet: {"addResidencySet:", "MTLCommandQueue", []string{"id<MTLResidencySet>"}, "void", "Metal/MTLCommandQueue.h"},

	selComputeCommandEncoder: {"computeCommandEncoder", "MTLCommandBuffer", nil, "id<MTLComputeCommandEncoder>", "Metal/MTLCommandBuffer.h"},
	selCommandBufferCommit:   {"commit", "MTLCommandBuffer", nil, "void", "Metal/MTLCommandBuffer.h"},
	selWaitUntilCompleted:    {"waitUntilCompleted", "MTLCommandBuffer", nil, "void", "Metal/MTLCommandBuffer.h"},
	selStatus:                {"status", "MTLCommandBuffer", nil, "MTLCommandBufferStatus", "Metal/MTLCommandBuffer.h"},
	selError:                 {"error", "MTLCommandBuffer", nil, "NSError*", "Metal/MTLCommandBuffer.h"},
	selGPUStartTime:          {"GPUStartTime", "MTLCommandBuffer", nil, "CFTimeInterval", "Metal/MTLCommandBuffer.h"},
	selGPUEndTime:            {"GPUEndTime", "MTLCommandBuffer", nil, "CFTimeInterval", "Metal/MTLCommandBuffer.h"},

	selSetComputePipelineState:           {"setComputePipelineState:", "MTLComputeCommandEncoder", []string{"id<MTLComputePipelineState>"}, "void", "Metal/MTLComputeCommandEncoder.h"},
	selSetBufferOffsetAtIndex:            {"setBuffer:offset:atIndex:", "MTLComputeCommandEncoder", []string{"id<MTLBuffer>", "NSUInteger", "NSUInteger"}, "void", "Metal/MTLComputeCommandEncoder.h"},
	selSetBytesLengthAtIndex:             {"setBytes:length:atIndex:", "MTLComputeCommandEncoder", []string{"const void*", "NSUInteger", "NSUInteger"}, "void", "Metal/MTLComputeCommandEncoder.h"},
	selSetThreadgroupMemoryLengthAtIndex: {"setThreadgroupMemoryLength:atIndex:", "MTLComputeCommandEncoder", []string{"NSUInteger", "NSUInteger"}, "void", "Metal/MTLComputeCommandEncoder.h"},
	selDispatchThreadgroups:              {"dispatchThreadgroups:threadsPerThreadgroup:", "MTLComputeCommandEncoder", []string{"MTLSize", "MTLSize"}, "void", "Metal/MTLComputeCommandEncoder.h"},
	selEndEncoding:                       {"endEncoding", "MTLCommandEncoder", nil, "void", "Metal/MTLCommandEncoder.h"},

	selContents: {"contents", "MTLBuffer", nil, "void*", "Metal/MTLBuffer.h"},

	selSetInitialCapacity: {"setInitialCapacity:", "MTLResidencySetDescriptor", []string{"NSUInteger"}, "void", "Metal/MTLResidencySet.h"},
	selSetLabel:           {"setLabel:", "MTLResidencySetDescriptor", []string{"NSString*"}, "void", "Metal/MTLResidencySet.h"},
	selAddAllocation:      {"addAllocation:", "MTLResidencySet", []string{"id<MTLAllocation>"}, "void", "Metal/MTLResidencySet.h"},
	selRemoveAllocation:   {"removeAllocation:", "MTLResidencySet", []string{"id<MTLAllocation>"}, "void", "Metal/MTLResidencySet.h"},
	selResidencyCommit:    {"commit", "MTLResidencySet", nil, "void", "Metal/MTLResidencySet.h"},
	selRequestResidency:   {"requestResidency", "MTLResidencySet", nil, "void", "Metal/MTLResidencySet.h"},
	selEndResidency:       {"endResidency", "MTLResidencySet", nil, "void", "Metal/MTLResidencySet.h"},
	selAllocatedSize:      {"allocatedSize", "MTLResidencySet", nil, "uint64_t", "Metal/MTLResidencySet.h"},
}

// Classes the darwin code looks up by name (objc_getClass).
var classes = []string{"NSString", "MTLCompileOptions", "MTLFunctionConstantValues", "MTLResidencySetDescriptor"}

// Constants of the Metal headers the darwin code passes (values as in the
// headers; checked by selectors_test.go against the quoted enums).
const (
	resourceStorageModeShared = 0       // MTLResourceStorageModeShared (Metal/MTLResource.h)
	languageVersion3_0        = 3 << 16 // MTLLanguageVersion3_0, macOS 13 (Metal/MTLLibrary.h)
	mathModeFast              = 2       // MTLMathModeFast, macOS 15 (Metal/MTLLibrary.h)
	utf8                      = 4       // NSUTF8StringEncoding (Foundation/NSString.h)
)

// MTLDataType values of the function constant types (Metal/MTLArgument.h).
const (
	dataTypeFloat  = 3
	dataTypeHalf   = 16
	dataTypeInt    = 29
	dataTypeUInt   = 33
	dataTypeShort  = 37
	dataTypeUShort = 41
	dataTypeChar   = 45
	dataTypeUChar  = 49
	dataTypeBool   = 53
)

// MTLCommandBufferStatus and MTLCommandBufferError (Metal/MTLCommandBuffer.h).
const (
	statusNotEnqueued = 0
	statusEnqueued    = 1
	statusCommitted   = 2
	statusScheduled   = 3
	statusCompleted   = 4
	statusError       = 5

	cbErrorNone            = 0
	cbErrorInternal        = 1
	cbErrorTimeout         = 2
	cbErrorPageFault       = 3
	cbErrorAccessRevoked   = 4
	cbErrorNotPermitted    = 7
	cbErrorOutOfMemory     = 8
	cbErrorInvalidResource = 9
	cbErrorMemoryless      = 10
	cbErrorDeviceRemoved   = 11
	cbErrorStackOverflow   = 12
)
