//! What the model does with what it read: decide (fix, retry, give up, go on), advance to the
//! next step or end, and issue the step's calls.

use super::*;

impl<O: Observer, J: Probabilities, const SHARED: bool> Handler<'_, O, J, SHARED> {
    /// The model reads every result of its last turn and decides the next one: `Some` ends
    /// the run that way; `None` leaves the calls to send in the active slots.
    pub(super) fn decide(&mut self) -> Option<TerminatedBy> {
        if let Some(script) = self.sc.task.script {
            // Recorded decisions: accept every result and take the next recorded turn.
            let by = if script.ending == Ending::GaveUp { TerminatedBy::GaveUp } else { TerminatedBy::Answer };
            return self.advance(by);
        }
        let sc = self.sc;
        let profile = &sc.profile;
        let turn = u64::from(self.ag.turn);
        let mut give_up = false;
        let mut reissue = false;
        let mut follows = false;
        let Agent { slots, model, .. } = &mut *self.ag;
        for (i, s) in slots.iter_mut().enumerate().filter(|(_, s)| s.active) {
            let slot = (i as u64 * TURN_SLOTS + turn) * DRAWS_PER_TURN;
            let perceived = match s.last_class {
                None => Perceived::Ok,
                Some(ErrorClass::Partial) if s.more_available => Perceived::Partial,
                Some(ErrorClass::Partial) => Perceived::Ok,
                Some(c) => perceive_failure(&mut *self.probs, s.signal, c, model.unit(slot), model.unit(slot + 1)),
            };
            let u = if perceived == Perceived::Ok { 0.0 } else { model.unit(slot + 2) };
            let mut action = act(profile, &mut *self.probs, perceived, &s.hist, u);
            if let (Action::Accept, Some(rule)) = (action, s.taint) {
                // A result that succeeded with changed content: one draw (the slot's fourth,
                // which only bad arguments use otherwise) decides whether the model notices a
                // wrong value, or follows an injected instruction.
                let fault = &sc.faults.rules[usize::from(rule)].fault;
                match take_tainted(profile, &mut *self.probs, fault, &s.hist, model.unit(slot + 3)) {
                    TaintTaken::Noticed(a) => action = a,
                    TaintTaken::WrongAccepted => {
                        self.obs.event(&Event::Misled { call_id: s.call_id, how: Misled::WrongAccepted });
                    }
                    TaintTaken::Follows => {
                        s.follow = sc.task.injected_call(rule);
                        follows |= s.follow.is_some();
                    }
                    TaintTaken::Accepted => {}
                }
            }
            match action {
                Action::Accept => s.active = false,
                Action::Repeat => {
                    if matches!(perceived, Perceived::Transient | Perceived::Terminal | Perceived::Ok) {
                        s.hist.model_retries += 1;
                    }
                    s.by = By::ModelReissue;
                    reissue = true;
                }
                Action::FixArgs => {
                    s.hist.fix_attempts += 1;
                    let old = s.variant;
                    s.variant += 1;
                    if s.bad_variant == Some(old) {
                        let fixed = self.probs.below(Prob::FixArgs, model.unit(slot + 3));
                        s.bad_variant = if fixed { None } else { Some(s.variant) };
                    }
                    s.by = By::ModelReissue;
                    reissue = true;
                }
                Action::GiveUp => give_up = true,
            }
            if O::EXPLAINS
                && perceived != Perceived::Ok
                && let Some(truth) = s.last_class
            {
                let draws = self.probs.take_draws();
                let (call_id, signal) = (s.call_id, s.signal);
                self.obs.event(&Event::Decision { call_id, signal, truth, perceived, action, draws: &draws });
            }
        }
        if give_up {
            return Some(TerminatedBy::GaveUp);
        }
        if follows && self.follow_injections() {
            reissue = true;
        }
        if reissue {
            return None;
        }
        self.advance(TerminatedBy::Answer)
    }

    /// Adds the calls the model makes because results told it to (the instructions it follows,
    /// while the step has room for calls); whether it added any.
    fn follow_injections(&mut self) -> bool {
        let mut any = false;
        for i in 0..self.ag.slots.len() {
            let Some(call) = self.ag.slots[i].follow.take() else { continue };
            if self.ag.slots.len() >= MAX_PARALLEL_CALLS {
                continue;
            }
            let call_id = self.ag.slots[i].call_id;
            self.obs.event(&Event::Misled { call_id, how: Misled::InjectionFollowed });
            self.ag.slots.push(Slot::new(call));
            any = true;
        }
        any
    }

    /// Loads the task's next step into the slots, or ends with `by` when the task has none left.
    pub(super) fn advance(&mut self, by: TerminatedBy) -> Option<TerminatedBy> {
        if self.ag.next_step == self.sc.task.steps.len() {
            return Some(by);
        }
        self.ag.slots.clear();
        let step = &self.sc.task.steps[self.ag.next_step];
        self.ag.slots.extend(step.iter().map(|&c| Slot::new(c)));
        self.ag.next_step += 1;
        None
    }

    /// Sends the active calls the model's turn asked for, once that turn has taken its time.
    pub(super) fn issue(&mut self) {
        let sc = self.sc;
        let calls = &sc.task.calls;
        let at = self.now;
        self.ag.pending = 0;
        for i in 0..self.ag.slots.len() {
            let s = &mut self.ag.slots[i];
            if !s.active {
                continue;
            }
            s.call_id = self.ag.next_call_id;
            self.ag.next_call_id += 1;
            s.delivered = 0;
            s.chain = 1;
            s.chain_start_ms = at;
            s.prev_delay_ms = 0;
            let spec = &calls[s.call as usize];
            self.obs.event(&Event::ToolCall {
                turn: self.ag.turn,
                call_id: s.call_id,
                tool: &sc.task.tools[usize::from(spec.tool)],
                args: spec.args_for(s.variant),
                variant: s.variant,
            });
            self.ag.pending += 1;
            self.schedule(at, Ev::ToolAttempt(i as u32));
        }
        if self.ag.pending == 0 {
            // A text-only turn (recorded scripts have them): the next turn follows it.
            self.schedule(at, Ev::TurnStart);
        }
    }
}
