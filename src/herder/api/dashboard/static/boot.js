// Runs before the app's modules, which load only whole: were one of them not sent (a server
// too busy or restarting) or were starting them to fail, the page would stay blank with no
// word of why. Until the app has started, this says so instead and offers a reload (a page
// never retries a module that failed, so only a reload can). Once started, the app removes
// the message and reports its own errors.

const starting = document.getElementById("starting");

function failedToStart(event) {
  if (!starting.isConnected) return;
  const why = event.target instanceof HTMLScriptElement
    ? "The dashboard's scripts did not all load (the server may be busy or restarting)."
    : `The dashboard could not start: ${event.message}.`;
  const reload = document.createElement("button");
  reload.type = "button";
  reload.textContent = "Reload";
  reload.addEventListener("click", () => window.location.reload());
  starting.className = "banner error";
  starting.setAttribute("role", "alert");
  starting.replaceChildren(`${why} `, reload);
}

// In the capture phase: a script's error event does not bubble, but passes through window.
window.addEventListener("error", failedToStart, true);
