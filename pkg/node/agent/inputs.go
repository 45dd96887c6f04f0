package agent

// Inputs are what a sync would compute from now: the caches read at this moment, with
// the settings of Config.
func (a *Agent) Inputs() (Inputs, error) { return a.inputs() }
