// Your secrets: their names and when they were set, never their values (no
// route returns one).  Add or replace one (the value goes to the server once,
// encrypted there, and the field is emptied), delete one.  Runs read them as
// `{{secrets.NAME}}`, in credential fields only.
import { useEffect, useState } from "react";
import { api } from "../api";
import { Wide } from "../components/Common";
import { when } from "../format";

interface SecretRow { name: string; created_at?: string; updated_at?: string }

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function Secrets() {
  const [rows, setRows] = useState<SecretRow[] | null>(null);
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [confirming, setConfirming] = useState<string | null>(null);

  const load = () => api<{ secrets: SecretRow[] }>("GET", "/api/secrets")
    .then((data) => setRows(data.secrets)).catch((err) => setError(err.message));
  useEffect(() => { load(); }, []);

  const wrongName = name && !NAME.test(name)
    ? "Use letters, digits and _, not starting with a digit (e.g. OPENAI_API_KEY)." : null;

  async function save(event: React.FormEvent) {
    event.preventDefault();
    setError(null);
    const replacing = rows?.some((row) => row.name === name);
    try {
      await api("POST", "/api/secrets", { json: { name, value } });
      setValue("");
      setName("");
      setNotice(`${replacing ? "Replaced" : "Saved"} ${name}.`);
      await load();
    } catch (err) {
      setError(`${name}: ${(err as Error).message}`);
    }
  }

  async function remove(secret: string) {
    setError(null);
    try {
      await api("DELETE", `/api/secrets/${encodeURIComponent(secret)}`);
      setConfirming(null);
      setNotice(`Deleted ${secret}.`);
      await load();
    } catch (err) {
      setError(`${secret}: ${(err as Error).message}`);
    }
  }

  return (
    <main>
      <h1>Secrets</h1>
      <p className="muted">A workflow reads one as <code>{"{{secrets.NAME}}"}</code> in a credential field
        (a provider key, a request header). Values are stored encrypted and never shown again.</p>
      {notice && <p role="status" className="ok">{notice}</p>}
      {error && <p role="alert" className="error">{error}</p>}
      <form className="secret-form" onSubmit={save} aria-label="Add a secret">
        <h2>Add or replace a secret</h2>
        <label htmlFor="secret-name">Name</label>
        <input id="secret-name" value={name} autoComplete="off" spellCheck={false}
               aria-invalid={wrongName ? true : undefined}
               aria-describedby={wrongName ? "secret-name-problem" : undefined}
               onChange={(event) => setName(event.target.value)} />
        {wrongName && <p id="secret-name-problem" className="error">{wrongName}</p>}
        <label htmlFor="secret-value">Value</label>
        <input id="secret-value" type="password" value={value} autoComplete="new-password"
               onChange={(event) => setValue(event.target.value)} />
        <div><button type="submit" disabled={!name || !value || !!wrongName}>Save the secret</button></div>
      </form>
      <h2>Your secrets</h2>
      {rows === null ? <p>Loading...</p> : rows.length === 0 ? <p>You have no secrets yet.</p> : (
        <Wide label="Your secrets"><table>
          <thead><tr><th>Name</th><th>Set</th><th>Actions</th></tr></thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.name}>
                <td><code>{row.name}</code></td>
                <td>{when(row.updated_at ?? row.created_at)}</td>
                <td>{confirming === row.name ? <span className="confirm">
                  <button type="button" className="danger" onClick={() => remove(row.name)}
                          aria-label={`Yes, delete ${row.name}`}>Yes, delete</button>{" "}
                  <button type="button" className="link" onClick={() => setConfirming(null)}>Keep it</button>
                </span> : <button type="button" className="link" aria-label={`Delete ${row.name}`}
                                  onClick={() => setConfirming(row.name)}>Delete</button>}</td>
              </tr>
            ))}
          </tbody>
        </table></Wide>
      )}
    </main>
  );
}
