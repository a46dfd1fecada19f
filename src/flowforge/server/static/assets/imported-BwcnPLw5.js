let n=null;function e(t){n=t}function o(){const t=n;return n=null,t}export{e as s,o as t};
