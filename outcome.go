package ctoharness

// Outcome says whose fault a run's result is, so that a batch can retry what
// the agent did not cause (model_failed, infra_failed) and count the rest.
// Status says whether the evidence passed; Outcome says why it did not.
type Outcome string

// Run outcomes.
const (
	OutcomePass Outcome = "pass"
	// OutcomeAgentFailed: the agent (Case) ran, and its change fails
	// verification or breaks policy (a disallowed path, a budget, a timeout,
	// no change, a secret printed).
	OutcomeAgentFailed Outcome = "agent_failed"
	// OutcomeModelFailed: the model provider failed (errors, rate limits, a
	// stalled stream, an unreachable endpoint); a retry may succeed.
	OutcomeModelFailed Outcome = "model_failed"
	// OutcomeInfraFailed: the harness, the sandbox, the disk or the copy
	// failed, or the run was interrupted; a retry may succeed.
	OutcomeInfraFailed Outcome = "infra_failed"
	// OutcomePolicyBlocked: a gate, the source repository, the task or the
	// configuration refused the run; a retry without changing them cannot
	// succeed.
	OutcomePolicyBlocked Outcome = "policy_blocked"
)

// AllOutcomes lists every outcome; the schema enum is checked against it.
func AllOutcomes() []Outcome {
	return []Outcome{OutcomePass, OutcomeAgentFailed, OutcomeModelFailed, OutcomeInfraFailed, OutcomePolicyBlocked}
}

// outcomeOf classes each blocker code; a code missing here classes as
// infra_failed (the harness does not know what happened), and a test keeps
// the table complete.
var outcomeOf = map[BlockerCode]Outcome{
	BlockStageUnknown: OutcomePolicyBlocked, BlockStageNotApproved: OutcomePolicyBlocked,
	BlockAllowCaseMissing: OutcomePolicyBlocked, BlockCaseStageMissing: OutcomePolicyBlocked,
	BlockCaseStageMismatch: OutcomePolicyBlocked, BlockBackendNotAllowed: OutcomePolicyBlocked,
	BlockPrevStageMissing: OutcomePolicyBlocked, BlockPrevStageInvalid: OutcomePolicyBlocked,
	BlockPrevStageStale: OutcomePolicyBlocked, BlockPrevStageTampered: OutcomePolicyBlocked,
	BlockPrevStageSchema: OutcomePolicyBlocked, BlockPrevStageUnproven: OutcomePolicyBlocked,
	BlockStageRecordUntrusted: OutcomePolicyBlocked,
	BlockConfigInvalid:        OutcomePolicyBlocked, BlockTaskInvalid: OutcomePolicyBlocked,
	BlockTaskRequired: OutcomePolicyBlocked, BlockAdversaryNotConfirmed: OutcomePolicyBlocked,
	BlockCaseCommandMissing: OutcomePolicyBlocked, BlockAgentConfigInvalid: OutcomePolicyBlocked,
	BlockSourceNotLocal: OutcomePolicyBlocked, BlockSourceNotFound: OutcomePolicyBlocked,
	BlockSourceSymlink: OutcomePolicyBlocked, BlockSourceNotGit: OutcomePolicyBlocked,
	BlockSourceBare: OutcomePolicyBlocked, BlockSourceLinkedWorktree: OutcomePolicyBlocked,
	BlockSourceAlternates: OutcomePolicyBlocked, BlockSourceNotOwned: OutcomePolicyBlocked,
	BlockSourceIsTarget: OutcomePolicyBlocked, BlockSourceExternal: OutcomePolicyBlocked,
	BlockSourceUnreadable: OutcomePolicyBlocked, BlockSourceDirty: OutcomePolicyBlocked,
	BlockSourceFilterConfigured: OutcomePolicyBlocked, BlockSourceFsmonitorConfigured: OutcomePolicyBlocked,
	BlockSourceCoreWorktree: OutcomePolicyBlocked, BlockSourceObjectFormat: OutcomePolicyBlocked,
	BlockSourceRefStorage: OutcomePolicyBlocked, BlockSourceGitFeature: OutcomePolicyBlocked,
	// Changed while the run held it: not the agent's (the sandbox kept it
	// out) and not worth a blind retry.
	BlockSourceMutated: OutcomePolicyBlocked, BlockFixtureDirtyStart: OutcomePolicyBlocked,
	// A git process at work in the source, an LFS object it lacks: the
	// source must change before a retry can help.
	BlockSourceBusy: OutcomePolicyBlocked, BlockLFSObjectMissing: OutcomePolicyBlocked,
	// A snapshot changed after its record: it blocks every run at its
	// commit until it is removed.
	BlockSnapshotChanged: OutcomePolicyBlocked,

	BlockSandboxUnavailable: OutcomeInfraFailed, BlockGovernanceUnavailable: OutcomeInfraFailed,
	BlockCopyFailed: OutcomeInfraFailed, BlockCopyUnfaithful: OutcomeInfraFailed,
	BlockCaseStartFailed: OutcomeInfraFailed, BlockCollectFailed: OutcomeInfraFailed,
	BlockArtifactWriteFailed: OutcomeInfraFailed, BlockInternal: OutcomeInfraFailed,
	BlockInterrupted: OutcomeInfraFailed, BlockCheckoutFailed: OutcomeInfraFailed,
	BlockCheckoutUnfaithful: OutcomeInfraFailed, BlockAgentNotInstalled: OutcomeInfraFailed,
	BlockAdversaryFailed: OutcomeInfraFailed,

	BlockAgentModelError: OutcomeModelFailed, BlockModelEndpointUnreachable: OutcomeModelFailed,
	BlockModelAPIError: OutcomeModelFailed, BlockModelRateLimited: OutcomeModelFailed,
	BlockModelStalled: OutcomeModelFailed,

	BlockCaseExitNonZero: OutcomeAgentFailed, BlockCaseTimeout: OutcomeAgentFailed,
	BlockCaseEventMalformed: OutcomeAgentFailed, BlockCaseEventOrder: OutcomeAgentFailed,
	BlockMissingRequiredEvent: OutcomeAgentFailed, BlockCaseEventLimit: OutcomeAgentFailed,
	BlockFixtureDirtyEnd: OutcomeAgentFailed, BlockDisallowedChange: OutcomeAgentFailed,
	BlockProtectedPathChange: OutcomeAgentFailed, BlockUnsafeFileName: OutcomeAgentFailed,
	BlockTestsFailed: OutcomeAgentFailed, BlockTestTimeout: OutcomeAgentFailed, BlockAdversarialFailed: OutcomeAgentFailed,
	BlockTestNotRun: OutcomeAgentFailed, BlockTestFlake: OutcomeAgentFailed,
	BlockDangerousScript: OutcomeAgentFailed, BlockTestScope: OutcomeAgentFailed,
	BlockTestBudget: OutcomeAgentFailed, BlockBudgetExceeded: OutcomeAgentFailed,
	BlockSetupFailed: OutcomeAgentFailed, BlockAgentNoChange: OutcomeAgentFailed,
	BlockSecretInEvidence: OutcomeAgentFailed,
}

// outcomeRank orders the classes when a run has blockers of several: the
// cause outranks its consequences (a model that failed leaves the agent with
// no change; a sandbox that failed leaves everything after it failing), and
// a policy refusal outranks both, since no retry can help it.
var outcomeRank = map[Outcome]int{
	OutcomeAgentFailed: 1, OutcomeModelFailed: 2, OutcomeInfraFailed: 3, OutcomePolicyBlocked: 4,
}

// OutcomeFor derives a run's outcome from its blockers: pass iff none;
// otherwise the highest-ranked class among them.
func OutcomeFor(blockers []Blocker) Outcome {
	out := OutcomePass
	for _, b := range blockers {
		o, ok := outcomeOf[b.Code]
		if !ok {
			o = OutcomeInfraFailed
		}
		if outcomeRank[o] > outcomeRank[out] {
			out = o
		}
	}
	return out
}
