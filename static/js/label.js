// The labeling form (templates/annotation/_label_form.html): keyboard shortcuts and the lease heartbeat.
// Keys come from data-key attributes; the heartbeat URL and period from data-heartbeat-* attributes.
(function () {
  "use strict";
  var form = document.querySelector("form.label-form");
  if (!form) {
    return;
  }
  // Once the page is leaving (a label, "Skip" or "Stop for now" was sent), keys send nothing more: a
  // rating key pressed while "Skip" loads would otherwise label the prompt just given back.
  var submitting = false;
  document.querySelectorAll("form.label-form, .task-actions form").forEach(function (leaving) {
    leaving.addEventListener("submit", function () {
      submitting = true;
    });
  });

  function typing(event) {
    var tag = event.target && event.target.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && event.target.type === "text");
  }

  // --- one value per prompt: a key presses its answer button -------------------------------------
  function keyButton(key) {
    var buttons = form.querySelectorAll("button[data-key]");
    for (var i = 0; i < buttons.length; i++) {
      if (buttons[i].getAttribute("data-key") === key) {
        return buttons[i];
      }
    }
    return null;
  }

  // --- per-option rating: a key rates the current option and moves to the next ------------------
  var rows = Array.prototype.slice.call(form.querySelectorAll(".option-row"));
  var current = 0;

  function setCurrent(index) {
    if (!rows.length) {
      return;
    }
    current = Math.max(0, Math.min(rows.length - 1, index));
    rows.forEach(function (row, i) {
      row.classList.toggle("current", i === current);
    });
    rows[current].scrollIntoView({block: "nearest"});
  }

  function rate(key) {
    var radios = rows[current].querySelectorAll("input[type=radio]");
    for (var i = 0; i < radios.length; i++) {
      if (radios[i].getAttribute("data-key") === key) {
        radios[i].checked = true;
        setCurrent(current + 1);
        return true;
      }
    }
    return false;
  }

  rows.forEach(function (row, index) {
    row.addEventListener("change", function () {
      setCurrent(index + 1);
    });
  });

  // --- a slider: the number input beside it is the value sent, empty until the worker sets one -------
  var slider = form.querySelector(".rating-slider");
  var number = form.querySelector(".rating-number");
  var refusal = form.querySelector(".slider-refusal");

  function touched() {
    slider.classList.remove("untouched");
    if (refusal) {
      refusal.hidden = true;
    }
  }

  if (slider && number) {
    if (number.value !== "") {  // a refused value shown again: the slider shows it too
      slider.value = number.value;
      touched();
    }
    slider.addEventListener("input", function () {
      number.value = slider.value;
      touched();
    });
    number.addEventListener("input", function () {
      if (number.value !== "") {
        slider.value = number.value;
        touched();
      }
    });
    // An untouched slider would send no value: say so here rather than after a round trip (the server
    // refuses it as well, for a page without this script).
    form.addEventListener("submit", function (event) {
      if (number.value === "") {
        event.preventDefault();
        event.stopImmediatePropagation();
        submitting = false;
        refusal.hidden = false;
        slider.focus();
      }
    });
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event) || submitting) {
      return;
    }
    var key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    if (rows.length) {
      if (key === "Enter") {
        event.preventDefault();
        form.requestSubmit();
      } else if (key === "ArrowDown" || key === "ArrowUp") {
        event.preventDefault();
        setCurrent(current + (key === "ArrowDown" ? 1 : -1));
      } else if (rate(key)) {
        event.preventDefault();
      }
      return;
    }
    if (slider && number) {
      // A digit typed anywhere starts typing the rating in the number input; arrows move the slider.
      if (/^[0-9]$/.test(key) && event.target !== number) {
        event.preventDefault();
        number.focus();
        number.value = key;
        number.dispatchEvent(new Event("input"));
      } else if ((key === "ArrowLeft" || key === "ArrowRight") && event.target !== slider) {
        event.preventDefault();
        slider.focus();
        if (slider.classList.contains("untouched")) {
          slider.dispatchEvent(new Event("input"));  // the first arrow sets the value the slider shows
        } else {
          slider[key === "ArrowRight" ? "stepUp" : "stepDown"]();
          slider.dispatchEvent(new Event("input"));
        }
      }
      return;
    }
    var button = keyButton(key);
    if (button) {
      event.preventDefault();
      form.requestSubmit(button);
    }
  });

  // --- heartbeat: keep the lease while the page is open -------------------------------------------
  var url = form.getAttribute("data-heartbeat-url");
  var period = parseInt(form.getAttribute("data-heartbeat-ms"), 10);
  var status = form.querySelector(".lease-status");
  var csrf = form.querySelector("input[name=csrfmiddlewaretoken]");
  if (url && period > 0) {
    var timer = window.setInterval(function () {
      fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: {"X-CSRFToken": csrf ? csrf.value : ""}
      }).then(function (response) {
        if (response.status === 409 || response.status === 400) {
          window.clearInterval(timer);
          return response.json().then(function (body) {
            if (status) {
              status.textContent = body.message || "Your time on this prompt has ended.";
            }
          });
        }
        return null;
      }).catch(function () {
        // Offline for a moment: the next beat tries again; a lease outlives two missed beats.
      });
    }, period);
  }
})();
