package hip

// The AMD backend creates streams and events with flags, through
// hipStreamCreateWithFlags and hipEventCreateWithFlags; errors name those
// calls. CUDA's names are its plain ones.
func init() {
	vendorCalls["StreamCreate"] = struct{ hip, cuda string }{"hipStreamCreateWithFlags", "cuStreamCreate"}
	vendorCalls["EventCreate"] = struct{ hip, cuda string }{"hipEventCreateWithFlags", "cuEventCreate"}
}
