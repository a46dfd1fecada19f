import { useState } from "react";
import { api, setApiKey } from "../api";
import { navigate } from "../router";

export function SignIn() {
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(null);
  return (
    <main className="signin">
      <h1>Sign in to flowforge</h1>
      <p>Use an API key from <code>flowforge users create NAME</code>. It is kept in this tab
        only (session storage).</p>
      <form onSubmit={async (event) => {
        event.preventDefault();
        setApiKey(key.trim());
        try {
          await api("GET", "/api/workflows?limit=1");
          navigate(new URLSearchParams(location.search).get("next") || "/");
        } catch (err) {
          setApiKey(null);
          setError((err as Error).message);
        }
      }}>
        <label htmlFor="key">API key</label>
        <input id="key" type="password" autoComplete="off" value={key} required
               onChange={(event) => setKey(event.target.value)} />
        <button type="submit">Sign in</button>
        {error && <p role="alert" className="error">{error}</p>}
      </form>
    </main>
  );
}
