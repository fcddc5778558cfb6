package testresults

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// RewardID is the one test a reward file gives.
const RewardID = "reward"

// parseReward reads a verifier's reward file (a container task's
// /logs/verifier/reward.txt): one number and nothing else. It is one test,
// RewardID, passed at 1 or more and failed below, so a task graded by a
// reward gets the baseline run and the task check that listed tests get:
// fail_to_pass ["reward"] holds the reward to failing on the base.
func parseReward(data []byte) ([]Result, error) {
	s := string(bytes.TrimSpace(data))
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("testresults: a reward file holds one number, not %q", clip(s, 64))
	}
	o := Fail
	if v >= 1 {
		o = Pass
	}
	return []Result{{ID: RewardID, Outcome: o, Output: "reward " + s}}, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
