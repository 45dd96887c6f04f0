package agent

// Inputs are what a sync would compute from now: the caches read at this moment, with
// the settings of Config, listed whole (the agent's views are left to its syncs).
func (a *Agent) Inputs() (Inputs, error) { return a.read(false) }
