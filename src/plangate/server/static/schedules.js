// The console's "Schedules" view: the caller's schedules (a formula on a cron expression or an interval),
// when each fires next, pause and resume, and one schedule's latest slots with the run each started (or why
// none: skipped, queued, failed). Every server and worker fires the schedules; this page only reads them
// and changes whether one is paused. Routes: #/schedules, #/schedules/<name>.

import { api } from "./api.js";
import { badge, clock, h, replace } from "./dom.js";
import { $, announce, itemsOf, showError } from "./page.js";

const POLL_MS = 2000;

/** The schedule the hash names: undefined when the page is not on this view, null when none is chosen. */
export function schedulesRoute() {
  const match = location.hash.match(/^#\/schedules(?:\/([^/?]+))?\/?$/);
  if (!match) return undefined;
  return match[1] ? decodeURIComponent(match[1]) : null;
}

function when(schedule) {
  return schedule.cron ? `cron ${schedule.cron} (${schedule.timezone})` : `every ${schedule.every} s`;
}

function nextText(schedule) {
  if (schedule.paused) return "paused";
  return schedule.next_slot ? `next ${clock(schedule.next_slot)}` : "";
}

export class SchedulesView {
  constructor() {
    this.name = null;
    this.timer = null;
    this.signature = "";
  }

  /** Show the view, with the schedule `name` (null: the list only). */
  open(name) {
    this.name = name;
    this.signature = "";
    this.refresh();
  }

  hide() {
    clearTimeout(this.timer);
    this.timer = null;
    this.name = null;
  }

  async refresh() {
    clearTimeout(this.timer);
    try {
      const listed = itemsOf(await api("GET", "/v1/schedules"));
      const detail = this.name ? await api("GET", `/v1/schedules/${encodeURIComponent(this.name)}`) : null;
      this.render(listed, detail);
    } catch (error) {
      if (error.status === 404 && this.name) {
        showError(new Error(`No schedule named ${this.name}.`));
        this.name = null;
      } else if (error.status !== 401) showError(error);
    }
    if (schedulesRoute() !== undefined && !document.hidden) this.timer = setTimeout(() => this.refresh(), POLL_MS);
    else if (schedulesRoute() !== undefined) this.timer = setTimeout(() => this.refresh(), POLL_MS * 5);
  }

  render(listed, detail) {
    // redraw only what changed, so a focused button keeps its focus between polls
    const signature = JSON.stringify([listed, detail]);
    if (signature === this.signature) return;
    this.signature = signature;
    $("schedules-empty").hidden = listed.length > 0;
    replace(
      $("schedules"),
      listed.map((schedule) => this.item(schedule)),
    );
    $("schedule-empty").hidden = Boolean(detail);
    $("schedule-detail").hidden = !detail;
    if (detail) this.detail(detail.schedule, detail.slots || []);
  }

  item(schedule) {
    const current = schedule.name === this.name;
    return h(
      "li",
      { class: current ? "run-item current" : "run-item", dataset: { schedule: schedule.name } },
      h(
        "a",
        { href: `#/schedules/${encodeURIComponent(schedule.name)}`, "aria-current": current ? "page" : null },
        h("span", { class: "run-name", text: schedule.name }),
        badge(schedule.paused ? "paused" : "active"),
        h("small", { class: "run-sub", text: `${schedule.formula} · ${when(schedule)}` }),
        h("small", { class: "run-sub schedule-next", text: nextText(schedule) }),
      ),
    );
  }

  detail(schedule, slots) {
    $("schedule-title").textContent = schedule.name;
    $("schedule-meta").textContent =
      `${schedule.formula} · ${when(schedule)} · missed: ${schedule.missed} · overlap: ${schedule.overlap}`;
    $("schedule-next").textContent = nextText(schedule);
    replace($("schedule-state"), badge(schedule.paused ? "paused" : "active"));
    const toggle = $("schedule-toggle");
    toggle.textContent = schedule.paused ? "Resume" : "Pause";
    toggle.onclick = () => this.setPaused(schedule, !schedule.paused);
    $("schedule-slots-empty").hidden = slots.length > 0;
    replace(
      $("schedule-slots"),
      slots.map((slot) =>
        h(
          "tr",
          { dataset: { state: slot.state } },
          h("td", { text: clock(slot.slot) }),
          h("td", {}, badge(slot.state)),
          h(
            "td",
            {},
            slot.run_id
              ? h("a", { href: `#/runs/${encodeURIComponent(slot.run_id)}`, class: "slot-run", text: slot.run_id })
              : "",
            slot.run_status ? [" ", badge(slot.run_status)] : null,
          ),
          h("td", { class: "muted", text: slot.note || "" }),
        ),
      ),
    );
  }

  async setPaused(schedule, paused) {
    const toggle = $("schedule-toggle");
    toggle.disabled = true;
    try {
      await api("POST", `/v1/schedules/${encodeURIComponent(schedule.name)}/${paused ? "pause" : "resume"}`);
      announce(`Schedule ${schedule.name} ${paused ? "paused" : "resumed"}.`);
      this.signature = "";
      await this.refresh();
    } catch (error) {
      showError(error);
    } finally {
      toggle.disabled = false;
    }
  }
}
