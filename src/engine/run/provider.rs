//! A model turn at the provider: the turn starts (a step's calls, or the model's answer), and
//! each attempt of the model call meets the provider's faults, limits and the retry rules.

use super::*;

impl<'a, O: Observer, J: Probabilities, const SHARED: bool> Handler<'a, O, J, SHARED> {
    pub(super) fn turn_start(&mut self) {
        for s in self.ag.slots.iter().filter(|s| s.active && s.delivered != 1) {
            self.obs.event(&Event::ProtocolViolation { call_id: s.call_id });
        }
        if let Some(script) = self.sc.task.script
            && script.ending == Ending::CutOff
            && self.ag.next_step == self.sc.task.steps.len()
            && self.ag.slots.iter().all(|s| !s.active || s.delivered == 1)
        {
            // The recording stops here: no final model call.
            return self.finish(TerminatedBy::StepCap);
        }
        if self.ag.turn >= self.sc.policy.max_steps {
            return self.finish(TerminatedBy::StepCap);
        }
        self.schedule(self.now, Ev::ModelAttempt);
    }

    /// One attempt at the provider: a fault (retried by the orchestrator, or the end of the
    /// run), or the model's next turn.
    pub(super) fn model_attempt(&mut self) {
        // Budgets are checked before every model call with the cost that call will add.
        if self.past_time_budget(self.now.saturating_add(self.sc.profile.model_latency_ms)) {
            return self.finish(TerminatedBy::TimeBudget);
        }
        let prov = self.sc.faults.provider_target();
        self.ag.attempts[prov] += 1;
        let is_retry = self.ag.provider_chain > 0;
        match self.provider_fault(prov) {
            Some(Refused { fault: Fault::Stream { how: StreamBreak::Stall { ms }, .. }, rule, .. }) => {
                self.stalled(prov, is_retry, *ms, rule)
            }
            Some(refused) => self.refused(prov, is_retry, refused),
            None => self.answered(prov, is_retry, None),
        }
    }

    /// A stream that stalls for `ms` before the rest of the answer: a slow answer, unless the
    /// agent's time runs out first (the call is then cut at its deadline, as a slow timeout is).
    fn stalled(&mut self, prov: usize, is_retry: bool, ms: u64, rule: Option<u16>) {
        let resumed = self.now.saturating_add(ms);
        let answered = resumed.saturating_add(self.sc.profile.model_latency_ms);
        if self.past_time_budget(answered) {
            self.obs.event(&Event::ModelCall {
                turn: self.ag.turn + 1,
                t_ms: self.now,
                status: 0,
                tokens_in: 0,
                tokens_out: 0,
                retry: is_retry,
                rule,
                fired: rule.is_some(),
                wasted: false,
                load: false,
                ends: true,
            });
            self.now = self.deadline().map_or(answered, |d| answered.min(d));
            return self.finish(TerminatedBy::TimeBudget);
        }
        self.now = resumed;
        self.answered(prov, is_retry, rule);
    }

    /// The fault this attempt meets, if any: the provider still refusing a call that came back
    /// before the wait it announced, the fleet's rate limit, or a scheduled fault.
    #[inline(always)]
    fn provider_fault(&mut self, prov: usize) -> Option<Refused<'a>> {
        let sc = self.sc;
        let plan = &sc.faults;
        let attempt = self.ag.attempts[prov];
        let fleet_attempt = self.count_fleet_attempt(prov);
        let refusal = self.ag.refusals[prov];
        if sc.task.script.is_none() && self.now < refusal.until_ms {
            let fault = &plan.rules[usize::from(refusal.rule)].fault;
            return Some(Refused {
                fault,
                rule: Some(refusal.rule),
                retry_after_ms: Some(refusal.until_ms - self.now),
                fresh: false,
            });
        }
        if SHARED
            && sc.loaded
            && let Err(wait) = self.sh.provider.admit(self.now, self.ag.context_tokens)
        {
            return Some(Refused {
                fault: LoadFault::RateLimited.fault(),
                rule: None,
                retry_after_ms: wait,
                fresh: true,
            });
        }
        let at = Attempt { target: prov, attempt, fleet_attempt, successes: self.ag.successes[prov] };
        decide_fault::<SHARED>(plan, self.sh, &mut self.ag.injector, at, self.now).map(|f| Refused {
            fault: &plan.rules[usize::from(f.rule)].fault,
            rule: Some(f.rule),
            retry_after_ms: f.retry_after_ms,
            fresh: true,
        })
    }

    /// A refused attempt: the orchestrator retries it after its delay, or the run ends (gave
    /// up, or out of time).
    fn refused(&mut self, prov: usize, is_retry: bool, r: Refused<'_>) {
        let sc = self.sc;
        // A retry sent before the wait the fleet's rate limit announced is refused again.
        let early = SHARED && sc.loaded && is_retry && self.now < self.ag.load_until[prov];
        let Refused { fault, rule, retry_after_ms, fresh } = r;
        self.ag.provider_chain += 1;
        let latency = match fault {
            Fault::Timeout { after_ms } => *after_ms,
            // A stream breaks as the answer comes: the agent waited for it.
            Fault::Stream { .. } => sc.profile.model_latency_ms,
            _ => 0,
        };
        // A broken stream's input was read, and is billed.
        let tokens_in = if matches!(fault, Fault::Stream { .. }) { self.ag.context_tokens } else { 0 };
        if self.strat.budgets && sc.policy.max_tokens.is_some_and(|max| self.ag.tokens_used + tokens_in > max) {
            return self.finish(TerminatedBy::TokenBudget);
        }
        self.ag.tokens_used += tokens_in;
        let answered = self.now.saturating_add(latency);
        match (fresh, retry_after_ms, rule) {
            (true, Some(ms), Some(rule)) => {
                self.ag.refusals[prov] = Refusal { until_ms: answered.saturating_add(ms), rule };
            }
            (true, Some(ms), None) => self.ag.load_until[prov] = answered.saturating_add(ms),
            _ => {}
        }
        // A broken stream reaches the orchestrator only when the retries it copies go on past
        // the answer's start (no SDK's do).
        let retried_here = self.retry.broken_streams || !matches!(fault, Fault::Stream { .. });
        let mut retry = sc.task.script.is_some()
            || (retried_here
                && self.retry.may_retry(fault.class(), self.ag.provider_chain, retry_after_ms)
                && self.budget_allows(self.ag.first_attempts.max(1)));
        let mut delay = 0;
        if retry && sc.task.script.is_none() {
            let slot = jitter_slot(PROVIDER_JITTER_BASE, u64::from(self.ag.turn), self.ag.provider_chain);
            let u = self.ag.jitter.unit(slot);
            delay = self.retry.delay_ms(self.ag.provider_chain - 1, self.ag.provider_prev_delay, u, retry_after_ms);
        }
        let next_at = answered.saturating_add(delay);
        let over_budget = self.past_time_budget(answered)
            || (retry && self.past_time_budget(next_at.saturating_add(sc.profile.model_latency_ms)));
        retry &= !over_budget;
        self.obs.event(&Event::ModelCall {
            turn: self.ag.turn + 1,
            t_ms: self.now,
            status: if let Fault::Stream { .. } = fault {
                crate::fault::BROKEN_STREAM_STATUS
            } else {
                fault.status().unwrap_or(0)
            },
            tokens_in,
            tokens_out: 0,
            retry: is_retry,
            rule,
            fired: fresh && rule.is_some(),
            wasted: (!fresh && is_retry) || early,
            load: rule.is_none(),
            ends: !retry,
        });
        if retry {
            self.ag.provider_prev_delay = delay;
            self.ag.orchestrator_retries += 1;
            self.schedule(next_at, Ev::ModelAttempt);
        } else if over_budget {
            // A slow answer ends at the agent's deadline; a retry that could not finish in
            // time is not sent.
            self.now = self.deadline().map_or(answered, |d| answered.min(d));
            self.finish(TerminatedBy::TimeBudget);
        } else {
            self.now = answered;
            self.finish(TerminatedBy::GaveUp);
        }
    }

    /// The model answers (late when its stream stalled under rule `stall`): its turn is decided, charged to the token budget, and its calls
    /// issued (or the run ends with its answer).
    fn answered(&mut self, prov: usize, is_retry: bool, stall: Option<u16>) {
        let sc = self.sc;
        self.ag.successes[prov] += 1;
        self.count_fleet_success(prov);
        self.ag.provider_chain = 0;
        self.ag.provider_prev_delay = 0;
        self.ag.turn += 1;
        let ending = self.decide();
        let tokens_out = match ending {
            Some(by) => {
                let text = if by == TerminatedBy::Answer { self.sc.task.final_text.len() } else { GIVE_UP_TEXT.len() };
                text as u64 / 4 + 8
            }
            None => {
                let calls = &sc.task.calls;
                self.ag
                    .slots
                    .iter()
                    .filter(|s| s.active)
                    .map(|s| calls[s.call as usize].args_for(s.variant).len() as u64 / 4 + 8)
                    .sum()
            }
        };
        let tokens_in = self.ag.context_tokens;
        if self.strat.budgets
            && sc.policy.max_tokens.is_some_and(|max| self.ag.tokens_used + tokens_in + tokens_out > max)
        {
            return self.finish(TerminatedBy::TokenBudget);
        }
        self.ag.tokens_used += tokens_in + tokens_out;
        debug_assert!(
            !self.strat.budgets || sc.policy.max_tokens.is_none_or(|max| self.ag.tokens_used <= max),
            "a strategy that keeps budgets never spends past the token budget"
        );
        self.ag.context_tokens += tokens_out;
        if SHARED && sc.loaded {
            self.sh.provider.charge(tokens_out);
        }
        self.obs.event(&Event::ModelCall {
            turn: self.ag.turn,
            t_ms: self.now,
            status: 200,
            tokens_in,
            tokens_out,
            retry: is_retry,
            rule: stall,
            fired: stall.is_some(),
            wasted: false,
            load: false,
            ends: ending.is_some(),
        });
        self.now = self.now.saturating_add(sc.profile.model_latency_ms);
        match ending {
            Some(by) => self.finish(by),
            None => self.issue(),
        }
    }
}

/// A fault an attempt at the provider met: the fault, its rule when scheduled, the wait the
/// answer announces, and whether it was decided now (rather than the provider refusing a call
/// that came back before its wait).
struct Refused<'a> {
    fault: &'a Fault,
    rule: Option<u16>,
    retry_after_ms: Option<u64>,
    fresh: bool,
}
