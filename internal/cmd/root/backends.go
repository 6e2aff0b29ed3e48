package root

// The backends register themselves with internal/hip when linked in;
// --backend auto tries the GPU ones first (hip, then cuda), then the
// simulator.
import (
	_ "miotool/internal/hip/amd"
	_ "miotool/internal/hip/cuda"
	_ "miotool/internal/hip/sim"
)
